package tracking

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/ingest"
	"github.com/keelwork/keel/modules/tracking/sim"
)

// instance is one running process of the module: its engine client
// working the carrier queries, on the real clock.
type instance[TTx any] struct {
	m      *Module[TTx]
	client *keel.Client[TTx]
}

// startInstance starts the module with a working engine client on e.
func startInstance[TTx any](t *testing.T, e *env[TTx], id string, cs []domain.Carrier) *instance[TTx] {
	t.Helper()
	m, err := New(&module.Host[TTx]{DB: e.DB, Logger: moduletest.Quiet(), Settings: map[string]string{"tracking.backfill_recheck": "1s"}},
		WithCarriers(cs...))
	if err != nil {
		t.Fatalf("new module: %v", err)
	}
	cfg := &keel.Config{ID: id, Logger: moduletest.Quiet(), FetchPollInterval: 50 * time.Millisecond, PromoteInterval: 50 * time.Millisecond,
		RetryPolicy: &keel.JitterRetryPolicy{Base: 100 * time.Millisecond, Cap: 300 * time.Millisecond}}
	if err := m.Configure(cfg); err != nil {
		t.Fatalf("configure: %v", err)
	}
	return &instance[TTx]{m: m, client: e.Run(t, cfg, m)}
}

// simCarrier starts a simulator for c and points c's pull API at it.
func simCarrier(t *testing.T, c *domain.Carrier) *sim.Carrier {
	t.Helper()
	c.APIKey = "key-" + c.Code
	s := sim.New(c)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c.PullURL = s.URL()
	return s
}

// gapParcels gives the simulator n parcels of two events and ingests only
// the second of each, in one push, so that every parcel has one open gap
// (seq 1) and the n backfills are queued at once.
func gapParcels[TTx any](t *testing.T, m *Module[TTx], s *sim.Carrier, prefix string, n int) []string {
	t.Helper()
	var waybills, raws []string
	for i := 0; i < n; i++ {
		wb := fmt.Sprintf("%s%05d", prefix, i)
		evs := sim.Journey(s.Config, wb, 2, time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC), time.Hour)
		s.AddParcel(evs...)
		raws = append(raws, fmt.Sprintf(`{"event_id":"%s","waybill":"%s","seq":2,"code":"%s","occurred_at":"%s","location":"%s"}`,
			evs[1].EventID, wb, evs[1].Code, evs[1].OccurredAt, evs[1].Location))
		waybills = append(waybills, wb)
	}
	if _, err := m.svc.Ingest(context.Background(), s.Config.Code, ingest.ViaWebhook, decode(t, `{"events":[`+strings.Join(raws, ",")+`]}`)); err != nil {
		t.Fatal(err)
	}
	return waybills
}

type keelInsert = keel.InsertParams

type simEvent = sim.Event

func simJourney(c *domain.Carrier, wb string, n int) []sim.Event {
	return sim.Journey(c, wb, n, time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC), time.Hour)
}
