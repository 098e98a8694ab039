package alarm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Fleet is a device simulator: devices behind gateways publishing
// temperature over MQTT every interval, each with its own boot epoch and
// sequence. In storm mode a gateway fault makes every device behind the
// faulty gateways report an over-threshold reading (the seed's gateway
// storm, scaled), and a few of them a severe one. With Heat on (keel
// dev's fleet) one device at a time runs hot for a while and cools down
// again, so the alarm board of a demo fires, escalates and recovers
// instead of staying empty.
type Fleet struct {
	pub      *Publisher
	devices  []simDevice
	interval time.Duration
	storm    atomic.Bool
	severe   atomic.Int64 // every n-th device reports severe in storm mode (0: none)
	heat     atomic.Bool
	rounds   atomic.Int64
	sent     atomic.Int64
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

type simDevice struct {
	gw, id string
	boot   int64
	seq    atomic.Int64
}

// FleetDevice names a simulated device.
func FleetDevice(i int) (gateway, device string) {
	return fmt.Sprintf("gw%03d", i/100), fmt.Sprintf("dev%06d", i)
}

// NewFleet makes n devices publishing through url.
func NewFleet(url string, n int, interval time.Duration) (*Fleet, error) {
	p, err := NewPublisher(url, fmt.Sprintf("keel-sim-%d", rand.IntN(1<<30)))
	if err != nil {
		return nil, err
	}
	f := &Fleet{pub: p, interval: interval, devices: make([]simDevice, n)}
	for i := range f.devices {
		f.devices[i].gw, f.devices[i].id = FleetDevice(i)
		f.devices[i].boot = 1
	}
	return f, nil
}

// Storm turns the gateway-fault storm on or off; severeEvery makes every
// n-th device severe during it.
func (f *Fleet) Storm(on bool, severeEvery int64) { f.storm.Store(on); f.severe.Store(severeEvery) }

// Heat turns the demo's heat cycle on or off (see heatReading).
func (f *Fleet) Heat(on bool) { f.heat.Store(on) }

// The demo's heat cycle, in rounds of the fleet: in each cycle of
// heatCycle rounds one device reads over temp-high's warning line for the
// first heatRounds of them (three readings open the alarm, the rule's
// hold) and then normal again (two close it, its recovery); every third
// cycle it reads over the critical line instead. The hot device moves on
// each cycle (the next in order), so the board gathers a history of
// instances over devices.
const (
	heatCycle  = 24
	heatRounds = 8
)

// heatReading is device i's reading in round when the heat cycle picks
// it, of n devices; ok is false when it reads normally.
func heatReading(round int64, i, n int) (v float64, ok bool) {
	if n <= 0 {
		return 0, false
	}
	cycle, phase := round/heatCycle, round%heatCycle
	if phase >= heatRounds || int(cycle%int64(n)) != i {
		return 0, false
	}
	if cycle%3 == 2 {
		return 125 + rand.Float64()*5, true
	}
	return 85 + rand.Float64()*10, true
}

// Sent is how many messages the fleet published.
func (f *Fleet) Sent() int64 { return f.sent.Load() }

// Run publishes a reading of every device each interval until Stop.
func (f *Fleet) Run(ctx context.Context) {
	ctx, f.cancel = context.WithCancel(ctx)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		t := time.NewTicker(f.interval)
		defer t.Stop()
		for {
			f.Round()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Round publishes one reading of every device.
func (f *Fleet) Round() {
	storm, sev, heat := f.storm.Load(), f.severe.Load(), f.heat.Load()
	round := f.rounds.Add(1) - 1
	for i := range f.devices {
		d := &f.devices[i]
		v := 20 + rand.Float64()*30
		if hv, ok := heatReading(round, i, len(f.devices)); heat && ok {
			v = hv
		}
		if storm {
			v = 85 + rand.Float64()*20
			if sev > 0 && int64(i)%sev == 0 {
				v = 130
			}
		}
		f.pub.Publish(Sample{Gateway: d.gw, Device: d.id, Metric: "temp", Value: v, Boot: d.boot, Seq: d.seq.Add(1), DeviceAt: time.Now()})
		f.sent.Add(1)
	}
}

// Stop ends Run and disconnects.
func (f *Fleet) Stop() {
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
	f.pub.Close()
}

// demoFleet registers and runs `keel dev`'s small fleet.
func (m *Module[TTx]) demoFleet(ctx context.Context, url string) (*Fleet, error) {
	for i := 0; i < m.set.DemoDevices; i++ {
		gw, id := FleetDevice(i)
		if err := m.RegisterDevice(ctx, id, "演示设备 "+id, gw); err != nil {
			return nil, err
		}
	}
	f, err := NewFleet(url, m.set.DemoDevices, m.set.DemoInterval)
	if err != nil {
		return nil, err
	}
	f.Heat(true)
	f.Run(ctx)
	return f, nil
}

// Fleet is `keel dev`'s simulator (nil elsewhere).
func (m *Module[TTx]) Fleet() *Fleet { return m.fleet }
