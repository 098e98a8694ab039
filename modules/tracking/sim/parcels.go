package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/keelwork/keel/modules/tracking/domain"
)

// Journey makes a parcel's events through the main chain (n events,
// 1 ≤ n ≤ 6) starting at start, one every step, in the carrier's codes
// (the first code mapped to each milestone). Sequenced carriers number
// them 1..n and give event ids; the others give neither.
func Journey(c *domain.Carrier, waybill string, n int, start time.Time, step time.Duration) []Event {
	chain := []domain.Milestone{domain.PickedUp, domain.Departed, domain.Arrived, domain.Customs, domain.OutForDelivery, domain.Delivered}
	places := []string{"深圳", "深圳机场", "洛杉矶", "洛杉矶海关", "LA 派送站", "客户"}
	codes := map[domain.Milestone]string{}
	for code, ms := range c.Codes {
		if prev, ok := codes[ms]; !ok || code < prev {
			codes[ms] = code
		}
	}
	var out []Event
	for i := 0; i < n && i < len(chain); i++ {
		e := Event{Waybill: waybill, Code: codes[chain[i]], Location: places[i],
			OccurredAt: start.Add(time.Duration(i) * step).In(c.Location()).Format(time.RFC3339)}
		if c.Sequenced {
			e.Seq = int64(i + 1)
			e.EventID = fmt.Sprintf("%s-%s-%d", c.Code, waybill, i+1)
		}
		out = append(out, e)
	}
	return out
}

// Messy reorders evs, repeats some (with a fresh pushed_at, as a carrier's
// retry does) and drops those at the indexes in gaps: what a webhook feed
// of real carriers looks like.
func Messy(r *rand.Rand, evs []Event, dupEvery int, gaps ...int) []Event {
	drop := map[int]bool{}
	for _, g := range gaps {
		drop[g] = true
	}
	var out []Event
	for i, e := range evs {
		if drop[i] {
			continue
		}
		out = append(out, e)
		if dupEvery > 0 && i%dupEvery == 0 {
			d := e
			d.PushedAt = time.Unix(int64(1_800_000_000+r.IntN(1000)), 0).UTC().Format(time.RFC3339)
			out = append(out, d)
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}
