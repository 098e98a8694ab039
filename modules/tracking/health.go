package tracking

import (
	"context"
	"time"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/store"
)

// ShareHealth is one share of a carrier's quota as the engine holds it.
type ShareHealth struct {
	Key     string  `json:"flow_key"`
	Share   float64 `json:"share_per_second"`
	Rate    float64 `json:"rate_per_second"`
	Running int     `json:"running"`
	// Backlog is the share's queries waiting to be claimed.
	Backlog int64 `json:"backlog"`
	// Used is the fraction of the share in use right now (running over
	// the concurrency limit; 1 while a backlog waits for tokens).
	Used     float64               `json:"used"`
	Breaker  keeltype.BreakerState `json:"breaker"`
	Paused   bool                  `json:"paused"`
	LastErr  string                `json:"last_error,omitempty"`
	LastFail *time.Time            `json:"last_failure_at,omitempty"`
}

// Health is a carrier's state for operators.
type Health struct {
	Carrier    string      `json:"carrier"`
	NameZH     string      `json:"name_zh"`
	NameEN     string      `json:"name_en"`
	Quota      float64     `json:"quota_per_second"`
	Realtime   ShareHealth `json:"realtime"`
	Backfill   ShareHealth `json:"backfill"`
	OpenGaps   int64       `json:"open_gaps"`
	OldestGap  *time.Time  `json:"oldest_gap_at,omitempty"`
	Refused    int64       `json:"refused_pushes"`
	MappingVer int         `json:"mapping_version"`
	carrier    *domain.Carrier
}

// Degraded reports whether a share's breaker is not closed or it is paused.
func (h *Health) Degraded() bool {
	bad := func(s ShareHealth) bool { return s.Paused || (s.Breaker != "" && s.Breaker != keeltype.BreakerClosed) }
	return bad(h.Realtime) || bad(h.Backfill)
}

// Healths lists every carrier's health.
func (m *Module[TTx]) Healths(ctx context.Context) ([]*Health, error) {
	// The gap and refusal counts cover every carrier in one read each:
	// read per carrier, the console's overview card issued them once per
	// carrier and, on a loaded SQLite, outlived the card's bound.
	counts, err := m.healthCounts(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Health
	for _, c := range m.carriers {
		h, err := m.healthOf(ctx, c.Code, counts)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// healthCounts is what Health reads for all carriers at once.
type healthCounts struct {
	gaps map[string]store.GapCount
	sec  []store.SecurityRow
}

func (m *Module[TTx]) healthCounts(ctx context.Context) (*healthCounts, error) {
	gaps, err := m.store.OpenGapCounts(ctx)
	if err != nil {
		return nil, err
	}
	sec, err := m.store.SecurityCounts(ctx)
	if err != nil {
		return nil, err
	}
	return &healthCounts{gaps: gaps, sec: sec}, nil
}

func (m *Module[TTx]) health(ctx context.Context, code string) (*Health, error) {
	counts, err := m.healthCounts(ctx)
	if err != nil {
		return nil, err
	}
	return m.healthOf(ctx, code, counts)
}

func (m *Module[TTx]) healthOf(ctx context.Context, code string, counts *healthCounts) (*Health, error) {
	c, err := m.carrier(code)
	if err != nil {
		return nil, err
	}
	h := &Health{Carrier: c.Code, NameZH: c.NameZH, NameEN: c.NameEN, Quota: c.Quota, carrier: c,
		Realtime: ShareHealth{Key: c.RealtimeKey(), Share: c.RealtimeShare, Rate: c.Rate(c.RealtimeShare)},
		Backfill: ShareHealth{Key: c.BackfillKey(), Share: c.BackfillShare, Rate: c.Rate(c.BackfillShare)}}
	h.OpenGaps, h.OldestGap = counts.gaps[code].Open, counts.gaps[code].Oldest
	if h.MappingVer, err = m.store.ActiveVersion(ctx, m.DB, code); err != nil {
		return nil, err
	}
	for _, s := range counts.sec {
		if s.Carrier == code {
			h.Refused += s.Count
		}
	}
	client := m.Engine().Load()
	if client == nil {
		return h, nil
	}
	stats, err := client.FlowKeyStats(ctx, []string{h.Realtime.Key, h.Backfill.Key})
	if err != nil {
		return nil, err
	}
	for _, st := range stats {
		sh := &h.Realtime
		if st.Key == h.Backfill.Key {
			sh = &h.Backfill
		}
		sh.Backlog = st.Counts[keeltype.JobStateAvailable]
		sh.Running = int(st.Counts[keeltype.JobStateRunning])
		if st.State != nil {
			sh.Breaker, sh.Paused, sh.LastErr, sh.LastFail = st.State.BreakerState, st.State.PausedAt != nil, st.State.LastError, st.State.LastFailureAt
		}
		if sh.Breaker == "" {
			sh.Breaker = keeltype.BreakerClosed
		}
		sh.Used = float64(sh.Running) / float64(c.MaxConcurrent)
		if sh.Backlog > 0 {
			sh.Used = 1
		}
	}
	for _, sh := range []*ShareHealth{&h.Realtime, &h.Backfill} {
		if sh.Breaker == "" {
			sh.Breaker = keeltype.BreakerClosed
		}
	}
	return h, nil
}
