package tracking

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/sim"
)

// demo runs, for `keel dev`, a simulator per carrier (its pull API on a
// loopback port, which the carrier's configuration is pointed at) and a
// feed of demo parcels pushed to the webhook receiver the way real
// carriers push: duplicated, out of order, with gaps the backfills fill
// from the simulators.
type demo struct {
	sims    map[string]*sim.Carrier
	parcels int
	every   time.Duration
	url     func() string
	log     func(msg string, args ...any)
}

// newDemo starts the simulators before the engine runs any query.
func newDemo(cs []*domain.Carrier, parcels int, every time.Duration) (*demo, error) {
	d := &demo{sims: map[string]*sim.Carrier{}, parcels: parcels, every: every}
	for _, c := range cs {
		if c.APIKey == "" {
			c.APIKey = "demo-key-" + c.Code
		}
		s := sim.New(c)
		// The demo carriers hold what they granted each share, as real
		// carriers hold a quota.
		s.ShareQuota = map[string]float64{"realtime": c.RealtimeShare, "backfill": c.BackfillShare}
		if err := s.Start(); err != nil {
			d.close()
			return nil, err
		}
		c.PullURL = s.URL()
		d.sims[c.Code] = s
	}
	return d, nil
}

func (m *Module[TTx]) startDemo(ctx context.Context) error {
	if m.demo == nil {
		return fmt.Errorf("the simulators did not start")
	}
	m.demo.url = m.WebhookURL
	m.demo.log = m.Log.Info
	return nil
}

// run pushes the demo parcels, one every couple of seconds.
func (d *demo) run(ctx context.Context) {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4))
	start := time.Now().Add(-48 * time.Hour).Truncate(time.Hour)
	tick := time.NewTicker(d.every)
	defer tick.Stop()
	codes := make([]string, 0, len(d.sims))
	for code := range d.sims {
		codes = append(codes, code)
	}
	sort.Strings(codes)
	for i := 0; i < d.parcels; i++ {
		code := codes[i%len(codes)]
		s := d.sims[code]
		wb := fmt.Sprintf("%s%06d", map[string]string{"cnhub": "CN", "epacket": "EP", "swiftx": "SX"}[code], 202600+i)
		if len(wb) < 4 {
			wb = fmt.Sprintf("DM%06d", 202600+i)
		}
		n, gapped := 2+r.IntN(5), s.Config.Sequenced && i%3 == 0
		if gapped {
			n = 5
		}
		evs := sim.Journey(s.Config, wb, n, start.Add(time.Duration(i)*time.Hour), 7*time.Hour)
		s.AddParcel(evs...)
		var gaps []int
		if gapped {
			gaps = []int{1 + r.IntN(len(evs)-2)} // a middle event never pushed: backfilled
		}
		for _, e := range sim.Messy(r, evs, 2, gaps...) {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if st, err := s.Push(ctx, d.url()+code, 0, time.Now(), e); err != nil || st != 200 {
				d.log("demo push refused", "carrier", code, "waybill", wb, "status", st, "err", err)
			}
		}
	}
}

func (d *demo) close() {
	for _, s := range d.sims {
		_ = s.Close()
	}
}
