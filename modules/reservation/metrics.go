package reservation

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelwork/keel/module"
)

// metrics are the module's collectors (names keel_reservation_*; the alert
// rules in deploy/prometheus/reservation-alerts.yml depend on them).
type metrics struct {
	runDuration   *prometheus.HistogramVec // kind: seconds per scan / compensation run
	lastRun       *prometheus.GaugeVec     // kind: seconds the last run took
	scanned       *prometheus.CounterVec   // kind: candidates claimed by runs
	released      *prometheus.CounterVec   // path: scan, precise, assist, compensation
	failed        *prometheus.CounterVec   // path: records a run or job could not release
	restore       *prometheus.CounterVec   // result: ok, fail (capacity returned to slots)
	promotions    prometheus.Counter       // waitlist offers made from freed places
	delay         prometheus.Histogram     // seconds from expected to actual release
	deadLetters   prometheus.Gauge         // paid reservations given up on (current)
	deadLettered  prometheus.Counter       // records that became dead letters
	dryRun        prometheus.Counter       // reservations a dry-run category would have released
	holdsExpired  prometheus.Counter       // unpaid holds and offers that lapsed
	notifications *prometheus.CounterVec   // kind, result: sent, skipped, failed
	assistErrors  prometheus.Counter       // availability reads whose assist release failed
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "keel_reservation_run_duration_seconds",
			Help:    "Duration of release scan and compensation runs.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120}}, []string{"kind"}),
		lastRun: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "keel_reservation_last_run_duration_seconds",
			Help: "Duration of the last run of this instance."}, []string{"kind"}),
		scanned: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keel_reservation_scanned_total",
			Help: "Due reservations claimed by runs."}, []string{"kind"}),
		released: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keel_reservation_released_total",
			Help: "Reservations released as no-shows, by path."}, []string{"path"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keel_reservation_failed_total",
			Help: "Due reservations a run could not release after its retries, by path."}, []string{"path"}),
		restore: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keel_reservation_inventory_restore_total",
			Help: "Places returned to slots by releases, by result."}, []string{"result"}),
		promotions: prometheus.NewCounter(prometheus.CounterOpts{Name: "keel_reservation_waitlist_promotions_total",
			Help: "Freed places offered to waitlisted users."}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "keel_reservation_release_delay_seconds",
			Help:    "Actual minus expected release time.",
			Buckets: []float64{0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600}}),
		deadLetters: prometheus.NewGauge(prometheus.GaugeOpts{Name: "keel_reservation_dead_letters",
			Help: "Paid reservations whose release gave up after the maximum retries."}),
		deadLettered: prometheus.NewCounter(prometheus.CounterOpts{Name: "keel_reservation_dead_lettered_total",
			Help: "Records that became dead letters."}),
		dryRun: prometheus.NewCounter(prometheus.CounterOpts{Name: "keel_reservation_dry_run_total",
			Help: "Reservations a dry-run category would have released (counted per run)."}),
		holdsExpired: prometheus.NewCounter(prometheus.CounterOpts{Name: "keel_reservation_holds_expired_total",
			Help: "Unpaid holds and waitlist offers that lapsed."}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keel_reservation_notifications_total",
			Help: "Notification deliveries by kind and result."}, []string{"kind", "result"}),
		assistErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "keel_reservation_assist_errors_total",
			Help: "Availability reads whose assist release failed (the scan still covers them)."}),
	}
	err := module.Register(reg, m.runDuration, m.lastRun, m.scanned, m.released, m.failed, m.restore,
		m.promotions, m.delay, m.deadLetters, m.deadLettered, m.dryRun, m.holdsExpired, m.notifications, m.assistErrors)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// observe counts one transaction's outcome.
func (m *Module[TTx]) observe(p *pass, out *txOutcome) {
	if out == nil {
		return
	}
	m.met.released.WithLabelValues(p.path).Add(float64(len(out.released)))
	m.met.restore.WithLabelValues("ok").Add(float64(out.restoreOK))
	m.met.restore.WithLabelValues("fail").Add(float64(out.restoreFailed))
	m.met.promotions.Add(float64(out.promoted))
	for _, r := range out.released {
		m.met.delay.Observe(p.now.Sub(r.c.Due).Seconds())
	}
}
