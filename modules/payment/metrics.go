package payment

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the payment figures operators watch: callbacks refused,
// mismatched or repeated, the age of the oldest payment not yet posted,
// reconciliation discrepancies (count and amount), payments of unknown or
// manual outcome, and ledger postings; the alert rules on them are in
// docs/payment.md.
type metrics struct {
	refused     *prometheus.CounterVec // 验签失败 and every refusal before a business change
	mismatch    *prometheus.CounterVec // 字段不一致
	duplicate   *prometheus.CounterVec // 重复回调
	callbacks   *prometheus.CounterVec
	unposted    prometheus.Gauge     // 最老未记账年龄
	discrepancy prometheus.Gauge     // 差异笔数
	discAmount  *prometheus.GaugeVec // 差异金额
	unknown     prometheus.Gauge
	manual      prometheus.Gauge
	ledger      *prometheus.CounterVec
}

func newMetrics() *metrics {
	return &metrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "keel", Subsystem: "payment",
			Name: "callback_refused_total", Help: "Callbacks refused before any business change (signature, skew, merchant, body), by channel and reason."},
			[]string{"channel", "reason"}),
		mismatch: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "keel", Subsystem: "payment",
			Name: "callback_mismatch_total", Help: "Verified callbacks whose merchant, amount or currency disagree with the payment order."},
			[]string{"channel"}),
		duplicate: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "keel", Subsystem: "payment",
			Name: "callback_duplicate_total", Help: "Verified callbacks repeating a fact already applied (acknowledged, no effect)."},
			[]string{"channel"}),
		callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "keel", Subsystem: "payment",
			Name: "callbacks_total", Help: "Verified callbacks by channel and outcome."},
			[]string{"channel", "outcome"}),
		unposted: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "keel", Subsystem: "payment",
			Name: "ledger_oldest_unposted_seconds", Help: "Age of the oldest successful payment the ledger has not booked (0: none)."}),
		discrepancy: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "keel", Subsystem: "payment",
			Name: "discrepancies_open", Help: "Payment reconciliation discrepancies not yet settled."}),
		discAmount: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "keel", Subsystem: "payment",
			Name: "discrepancy_amount_minor", Help: "Impact of the unsettled payment discrepancies, minor units, by currency."}, []string{"currency"}),
		unknown: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "keel", Subsystem: "payment",
			Name: "refunds_unknown", Help: "Refunds whose outcome is unknown (being queried)."}),
		manual: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "keel", Subsystem: "payment",
			Name: "manual_review", Help: "Payments and refunds waiting for manual review."}),
		ledger: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "keel", Subsystem: "payment",
			Name: "ledger_entries_total", Help: "Journal entries posted, by action."}, []string{"action"}),
	}
}

func (x *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{x.refused, x.mismatch, x.duplicate, x.callbacks, x.unposted, x.discrepancy,
		x.discAmount, x.unknown, x.manual, x.ledger}
}

// refreshGauges reads the gauges from the database (the authority).
func (m *Module[TTx]) refreshGauges(ctx context.Context) {
	h, err := m.Health(ctx)
	if err != nil {
		return
	}
	m.met.unposted.Set(h.OldestUnposted.Seconds())
	m.met.unknown.Set(float64(h.RefundsUnknown))
	m.met.manual.Set(float64(h.PaymentsManual + h.RefundsManual))
	m.met.discrepancy.Set(float64(h.Discrepancies))
	m.met.discAmount.Reset()
	for cur, v := range h.DiscrepancyAmount {
		m.met.discAmount.WithLabelValues(cur).Set(float64(v))
	}
}

// Health is the module's health in a few numbers.
type Health struct {
	PaymentsPending, PaymentsManual int64
	RefundsUnknown, RefundsManual   int64
	RefundsUnknownMinor             int64
	OldestUnposted                  time.Duration
	Discrepancies                   int64
	DiscrepancyAmount               map[string]int64
	SecurityRefusals                int64
}
