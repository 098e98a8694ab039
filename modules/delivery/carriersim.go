package delivery

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel/modules/delivery/cmpp"
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
	Addr, Account, Secret string
	MinDelay, MaxDelay    time.Duration
	Mix                   map[string]int
}

const (
	defaultSimAccount = "keel01"
	defaultSimSecret  = "keel-carrier-sim"
)

// parseSimSettings reads the simulator's settings; ok=false when none runs.
func parseSimSettings(m map[string]string) (s simSettings, ok bool, err error) {
	get := func(k string) string { return strings.TrimSpace(m["delivery."+k]) }
	s.Addr = get("carrier_sim")
	if s.Addr == "" || s.Addr == "off" {
		return s, false, nil
	}
	s.Account, s.Secret = get("carrier_sim_account"), get("carrier_sim_secret")
	if s.Account == "" {
		s.Account = defaultSimAccount
	}
	if len(s.Account) > 6 {
		return s, false, fmt.Errorf("delivery.carrier_sim_account %q: a CMPP account is 1 to 6 characters", s.Account)
	}
	if s.Secret == "" {
		s.Secret = defaultSimSecret
	}
	s.MinDelay, s.MaxDelay = time.Second, 5*time.Second
	if v := get("carrier_sim_delay"); v != "" {
		lo, hi, found := strings.Cut(v, "-")
		if !found {
			hi = lo
		}
		a, err1 := time.ParseDuration(strings.TrimSpace(lo))
		b, err2 := time.ParseDuration(strings.TrimSpace(hi))
		if err1 != nil || err2 != nil || a < 0 || b < a {
			return s, false, fmt.Errorf("delivery.carrier_sim_delay %q: want MIN-MAX durations, e.g. 1s-5s", v)
		}
		s.MinDelay, s.MaxDelay = a, b
	}
	if v := get("carrier_sim_mix"); v != "" {
		s.Mix = map[string]int{}
		for _, part := range strings.Split(v, "/") {
			stat, w, found := strings.Cut(strings.TrimSpace(part), ":")
			n, err := strconv.Atoi(w)
			if !found || err != nil || n < 0 || !knownStat(stat) {
				return s, false, fmt.Errorf("delivery.carrier_sim_mix %q: want STAT:WEIGHT/…, stats %s, %s or %s",
					v, cmpp.StatDelivered, cmpp.StatUndeliv, cmpp.StatExpired)
			}
			s.Mix[stat] = n
		}
	}
	return s, true, nil
}

func knownStat(s string) bool {
	return s == cmpp.StatDelivered || s == cmpp.StatUndeliv || s == cmpp.StatExpired
}

// startCarrierSim runs the configured simulator until ctx ends, and links
// the upstream to it when no carrier is configured.
func (m *Module[TTx]) startCarrierSim(ctx context.Context) error {
	s, ok, err := parseSimSettings(m.h.Settings)
	if err != nil || !ok {
		return err
	}
	car, err := newCarrier(carrierConfig{Addr: s.Addr, Account: s.Account, Secret: s.Secret,
		MinDelay: s.MinDelay, MaxDelay: s.MaxDelay, Mix: s.Mix, Logger: m.log})
	if err != nil {
		return fmt.Errorf("delivery: carrier simulator: %w", err)
	}
	if err := car.start(ctx); err != nil {
		return fmt.Errorf("delivery: carrier simulator on %s: %w", s.Addr, err)
	}
	m.log.Info("delivery: carrier simulator listening", "addr", car.addr(), "account", s.Account)
	m.goRun(func() {
		<-ctx.Done()
		stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = car.close(stop)
	})
	if m.set.UpstreamAddr == "" {
		m.set.UpstreamAddr, m.set.UpstreamUser, m.set.UpstreamSecret = car.addr(), s.Account, s.Secret
	}
	return nil
}
