package alarm

import (
	"context"
	"time"
)

// Undelivered is a severe instance neither delivered nor taken over.
type Undelivered struct {
	Instance string `json:"instance"`
	Device   string `json:"device"`
	Rule     string `json:"rule"`
	Muted    bool   `json:"muted"`
}

// SevereReconciliation is the proof for severe alarms: every one produced
// was delivered or taken over by a person; the counters say apart what was
// aggregated, sampled and shed.
type SevereReconciliation struct {
	Compared    int              `json:"compared"`
	Delivered   int              `json:"delivered"`
	TakenOver   int              `json:"taken_over"`
	Muted       int              `json:"muted"`
	Undelivered []Undelivered    `json:"undelivered"`
	Counters    map[string]int64 `json:"counters"`
}

// ReconcileSevere checks every severe instance received before cutoff.
func (m *Module[TTx]) ReconcileSevere(ctx context.Context, cutoff time.Time) (*SevereReconciliation, error) {
	out := &SevereReconciliation{}
	after := ""
	for {
		rows, err := m.DB.Query(ctx, m.q.Get("ReconSevere"), cutoff, after)
		if err != nil {
			return nil, err
		}
		n := 0
		for rows.Next() {
			var u Undelivered
			var sent, muted, taken bool
			if err := rows.Scan(&u.Instance, &u.Device, &u.Rule, &sent, &muted, &taken); err != nil {
				rows.Close()
				return nil, err
			}
			n++
			after = u.Instance
			out.Compared++
			switch {
			case sent:
				out.Delivered++
			case taken:
				out.TakenOver++
			case muted:
				out.Muted++
			default:
				out.Undelivered = append(out.Undelivered, u)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
	}
	c, err := m.CounterMap(ctx)
	out.Counters = c
	return out, err
}
