package delivery

import (
	"github.com/prometheus/client_golang/prometheus"
)

// collectors are the module's gauges, read from the instance's own state
// when scraped (names keel_delivery_*), registered through the host's
// registerer.
func (m *Module[TTx]) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keel_delivery_inflight_delivers",
			Help: "DELIVERs written to customers' connections on this instance and not yet acknowledged."},
			func() float64 { return float64(m.track.inFlight()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keel_delivery_connections",
			Help: "Customer connections this instance holds."},
			func() float64 { return float64(m.links.count()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keel_delivery_held_keys",
			Help: "Applications (flow keys) this instance holds a connection for and sends to."},
			func() float64 { return float64(len(m.heldKeys())) }),
	}
}

// count is the number of live connections held.
func (ls *links) count() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	n := 0
	for _, a := range ls.apps {
		for _, c := range a.conns {
			if !c.gone {
				n++
			}
		}
	}
	return n
}
