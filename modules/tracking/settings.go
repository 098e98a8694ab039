package tracking

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/modules/tracking/domain"
)

// Settings are the module's settings ("tracking.<key>").
type Settings struct {
	// CarriersFile is a JSON file holding the carriers ([]domain.Carrier);
	// empty: the demo set. A secret or API key written "env:NAME" is read
	// from the environment variable NAME, so files hold no secrets.
	CarriersFile string
	// WebhookAddr is where the webhook receiver listens (empty: no
	// listener; `keel dev` listens on a loopback port).
	WebhookAddr string
	// Workers is how many carrier queries run at once in this process.
	Workers int
	// Recheck is how long a backfill waits when the carrier does not have
	// the missing event yet.
	Recheck time.Duration
	// DemoParcels is how many parcels `keel dev` starts with, pushed one
	// event every DemoInterval.
	DemoParcels  int
	DemoInterval time.Duration
}

func parseSettings(all map[string]string, demo bool) (*Settings, error) {
	s := module.NewSettings(Name, all)
	out := &Settings{
		CarriersFile: s.String("carriers_file", "", nil),
		WebhookAddr:  s.String("webhook_addr", "", nil),
		Workers:      s.Int("workers", 32, 1, 1024),
		Recheck:      s.Duration("backfill_recheck", 5*time.Minute, time.Second, 24*time.Hour),
		DemoParcels:  s.Int("demo_parcels", 12, 0, 10000),
		DemoInterval: s.Duration("demo_interval", 1500*time.Millisecond, 10*time.Millisecond, time.Minute),
	}
	if demo && out.WebhookAddr == "" {
		out.WebhookAddr = "127.0.0.1:0"
	}
	return out, s.Err()
}

// loadCarriers reads the carriers file (or the demo set) and validates it.
func loadCarriers(path string) ([]domain.Carrier, error) {
	if path == "" {
		return domain.ValidateCarriers(domain.DemoCarriers())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading tracking.carriers_file: %w", err)
	}
	var cs []domain.Carrier
	if err := json.Unmarshal(b, &cs); err != nil {
		return nil, fmt.Errorf("reading tracking.carriers_file %s: %w", path, err)
	}
	for i := range cs {
		for j, s := range cs[i].Secrets {
			if cs[i].Secrets[j], err = fromEnv(s); err != nil {
				return nil, fmt.Errorf("carrier %q secrets[%d]: %w", cs[i].Code, j, err)
			}
		}
		if cs[i].APIKey, err = fromEnv(cs[i].APIKey); err != nil {
			return nil, fmt.Errorf("carrier %q api_key: %w", cs[i].Code, err)
		}
	}
	return domain.ValidateCarriers(cs)
}

func fromEnv(s string) (string, error) {
	name, ok := strings.CutPrefix(s, "env:")
	if !ok {
		return s, nil
	}
	v := os.Getenv(name)
	if v == "" {
		return "", fmt.Errorf("environment variable %s is empty", name)
	}
	return v, nil
}
