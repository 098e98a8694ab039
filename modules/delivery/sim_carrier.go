package delivery

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/modules/delivery/cmpp"
	"github.com/keelwork/keel/modules/delivery/sim"
)

// The carrier simulator outside the demo: with delivery.carrier_sim set
// (a listen address), an instance runs the simulator on its own settings
// and, unless delivery.upstream_addr names a carrier, links its upstream to
// it. Customers' SUBMITs then come back as status reports, ingested and
// pushed like a real carrier's: delivery records come into being on
// `keel serve` without a carrier contract (tests, staging, a rehearsal).
//
//	carrier_sim          listen address ("" or "off": none), e.g. 127.0.0.1:7891
//	carrier_sim_account  the platform's account at it (default keel01)
//	carrier_sim_secret   its secret (default keel-carrier-sim)
//	carrier_sim_delay    report delay range, e.g. 1s-5s (default 1s-5s)
//	carrier_sim_mix      report stats by weight, e.g. DELIVRD:90/UNDELIV:6/EXPIRED:4 (the default)
type simSettings struct {
	On                    bool
	Addr, Account, Secret string
	MinDelay, MaxDelay    time.Duration
	Mix                   map[string]int
}

const (
	defaultSimAccount = "keel01"
	defaultSimSecret  = "keel-carrier-sim"
)

// readSimSettings reads the simulator's settings (On=false: none runs);
// a bad value is refused through r, with the other settings.
func readSimSettings(r *module.Settings) simSettings {
	s := simSettings{MinDelay: time.Second, MaxDelay: 5 * time.Second}
	s.Addr = r.String("carrier_sim", "", nil)
	s.On = s.Addr != "" && s.Addr != "off"
	s.Account = r.String("carrier_sim_account", defaultSimAccount, func(v string) error {
		if len(v) < 1 || len(v) > 6 {
			return errors.New("a CMPP account of 1 to 6 characters")
		}
		return nil
	})
	s.Secret = r.String("carrier_sim_secret", defaultSimSecret, func(v string) error {
		if v == "" {
			return errors.New("a secret")
		}
		return nil
	})
	r.String("carrier_sim_delay", "", func(v string) error {
		lo, hi, found := strings.Cut(v, "-")
		if !found {
			hi = lo
		}
		a, err1 := time.ParseDuration(strings.TrimSpace(lo))
		b, err2 := time.ParseDuration(strings.TrimSpace(hi))
		if err1 != nil || err2 != nil || a < 0 || b < a {
			return errors.New("MIN-MAX durations, e.g. 1s-5s")
		}
		s.MinDelay, s.MaxDelay = a, b
		return nil
	})
	r.String("carrier_sim_mix", "", func(v string) error {
		mix := map[string]int{}
		for _, part := range strings.Split(v, "/") {
			stat, w, found := strings.Cut(strings.TrimSpace(part), ":")
			n, err := strconv.Atoi(w)
			if !found || err != nil || n < 0 || !knownStat(stat) {
				return fmt.Errorf("STAT:WEIGHT/…, stats %s, %s or %s", cmpp.StatDelivered, cmpp.StatUndeliv, cmpp.StatExpired)
			}
			mix[stat] = n
		}
		s.Mix = mix
		return nil
	})
	return s
}

func knownStat(s string) bool {
	return s == cmpp.StatDelivered || s == cmpp.StatUndeliv || s == cmpp.StatExpired
}

// startCarrierSim runs the configured simulator until ctx ends, and links
// the upstream to it when no carrier is configured.
func (m *Module[TTx]) startCarrierSim(ctx context.Context) error {
	s := m.set.Sim
	if !s.On {
		return nil
	}
	car, err := sim.NewCarrier(sim.CarrierConfig{Addr: s.Addr, Account: s.Account, Secret: s.Secret,
		MinDelay: s.MinDelay, MaxDelay: s.MaxDelay, Mix: s.Mix, Logger: m.log})
	if err != nil {
		return fmt.Errorf("delivery: carrier simulator: %w", err)
	}
	if err := car.Start(ctx); err != nil {
		return fmt.Errorf("delivery: carrier simulator on %s: %w", s.Addr, err)
	}
	m.log.Info("delivery: carrier simulator listening", "addr", car.Addr(), "account", s.Account)
	m.goRun(func() {
		<-ctx.Done()
		stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = car.Close(stop)
	})
	if m.set.UpstreamAddr == "" {
		m.set.UpstreamAddr, m.set.UpstreamUser, m.set.UpstreamSecret = car.Addr(), s.Account, s.Secret
	}
	return nil
}
