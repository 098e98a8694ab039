package keelevents

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the events backbone's Prometheus metrics. Counters count
// what this process did; gauges are refreshed from the database (the
// authority) every Config.StatsInterval.
type metrics struct {
	emitted, conflicts, published, publishAttempts, unknown, fencedMarks, archived prometheus.Counter
	partitionsHeld                                                                 prometheus.Gauge
	backlog, oldestUnpublished                                                     *prometheus.GaugeVec
	applied, duplicates, quarantined, manual, failures, replayed                   *prometheus.CounterVec
	lag, oldestUnacked                                                             *prometheus.GaugeVec
	staleVersions                                                                  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "keel", Subsystem: "events", Name: name, Help: help})
	}
	cv := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "keel", Subsystem: "events", Name: name, Help: help}, labels)
	}
	gv := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "keel", Subsystem: "events", Name: name, Help: help}, labels)
	}
	m := &metrics{
		emitted:         c("emitted_total", "Events written to the outbox by EmitTx (committed or not)."),
		conflicts:       c("emit_conflicts_total", "EmitTx calls refused: same id, other payload."),
		published:       c("published_total", "Outbox events marked published by this relay."),
		publishAttempts: c("publish_attempts_total", "Events handed to the bus by this relay (retries included)."),
		unknown:         c("publish_unknown_total", "Publishes whose outcome was unknown (republished with the same id)."),
		fencedMarks:     c("relay_fenced_marks_total", "Marks refused because another relay took the partition."),
		archived:        c("archived_total", "Published events moved to the archive."),
		partitionsHeld: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "keel", Subsystem: "events",
			Name: "relay_partitions_held", Help: "Outbox partitions this relay holds."}),
		backlog:           gv("outbox_backlog", "Unpublished events in the outbox.", "topic"),
		oldestUnpublished: gv("outbox_oldest_unpublished_seconds", "Age of the oldest unpublished event.", "topic"),
		applied:           cv("inbox_applied_total", "Events applied by a consumer's handler.", "consumer"),
		duplicates:        cv("inbox_duplicates_total", "Redeliveries absorbed by the inbox (same id, same digest).", "consumer"),
		quarantined:       cv("inbox_quarantined_total", "Events quarantined: same id, other digest.", "consumer"),
		manual:            cv("inbox_manual_total", "Events sent to manual after the attempt budget.", "consumer"),
		failures:          cv("inbox_handler_failures_total", "Handler calls that failed.", "consumer"),
		replayed:          cv("inbox_replayed_total", "Manual events replayed by an operator.", "consumer"),
		lag:               gv("consumer_lag", "Events emitted for a consumer and not yet in its inbox.", "consumer"),
		oldestUnacked:     gv("consumer_oldest_unacknowledged_seconds", "Age of the oldest event a consumer has not handled.", "consumer"),
		staleVersions:     cv("projection_stale_versions_total", "Versions older than the projection's, recorded and not applied.", "projection"),
	}
	if reg == nil {
		return m, nil
	}
	for _, col := range []prometheus.Collector{m.emitted, m.conflicts, m.published, m.publishAttempts, m.unknown,
		m.fencedMarks, m.archived, m.partitionsHeld, m.backlog, m.oldestUnpublished, m.applied, m.duplicates,
		m.quarantined, m.manual, m.failures, m.replayed, m.lag, m.oldestUnacked, m.staleVersions} {
		if err := reg.Register(col); err != nil {
			var already prometheus.AlreadyRegisteredError
			if errors.As(err, &already) {
				continue
			}
			return nil, fmt.Errorf("registering events metrics: %w", err)
		}
	}
	return m, nil
}
