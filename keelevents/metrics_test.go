package keelevents_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module/moduletest"
)

func TestMetricsNamedAndMoving(t *testing.T) { each(t, testMetrics[pgx.Tx], testMetrics[*sql.Tx]) }

// The metrics the relay and the inbox promise exist under their names and
// follow the work: while a consumer's handler is held, its lag is 1 and
// its oldest unacknowledged age grows; once released, the lag is 0, the
// event counts as emitted, published (with a publish attempt) and applied,
// and the outbox backlog and oldest unpublished age of its topic are 0.
func testMetrics[TTx any](t *testing.T, env *tenv[TTx]) {
	reg := prometheus.NewRegistry()
	cfg := fastConfig()
	cfg.Registerer, cfg.StatsInterval = reg, 20*time.Millisecond
	ev := newEvents(t, env, cfg)
	release := make(chan struct{})
	err := ev.Consume(keelevents.Consumer[TTx]{Name: "held", Topics: []string{"metric.probe"},
		Handle: func(ctx context.Context, _ keelsql.Tx[TTx], _ *keelevents.Delivery) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	start(t, env, ev)
	emit(t, env, ev, keelevents.Event{Topic: "metric.probe", ID: "p-1", Key: "k", Payload: json.RawMessage(`{}`)})
	// On SQLite the events share the one writer connection, which the held
	// handler's transaction holds: the gauges' refresh waits behind it, so
	// the held state can be seen only on PostgreSQL (on SQLite it sometimes
	// is, when a refresh ran before the handler began).
	if env.driver == "postgres" {
		eventually(t, "lag 1 and a growing oldest unacknowledged age", func() bool {
			return metric(t, reg, "keel_events_consumer_lag", "held") == 1 &&
				metric(t, reg, "keel_events_consumer_oldest_unacknowledged_seconds", "held") > 0
		})
	}
	close(release)
	// (On SQLite the held handler's transaction also held back the relay's
	// mark: the outbox gauges reach 0 after the inbox's.)
	eventually(t, "lag 0 and no backlog", func() bool {
		return metric(t, reg, "keel_events_consumer_lag", "held") == 0 &&
			metric(t, reg, "keel_events_consumer_oldest_unacknowledged_seconds", "held") == 0 &&
			metric(t, reg, "keel_events_outbox_backlog", "metric.probe") == 0 &&
			metric(t, reg, "keel_events_outbox_oldest_unpublished_seconds", "metric.probe") == 0
	})
	want := map[string]float64{"keel_events_emitted_total": 1, "keel_events_published_total": 1,
		"keel_events_publish_attempts_total": 1, "keel_events_publish_unknown_total": 0,
		"keel_events_inbox_applied_total": 1, "keel_events_inbox_quarantined_total": 0}
	// The counters move just after the commits they count.
	moduletest.WaitFor(t, 30*time.Second, "the counters", func() bool {
		for name, w := range want {
			if metric(t, reg, name, "") != w {
				return false
			}
		}
		return true
	})
}

// metric is the value of a registered metric (the sample whose one label
// has value label, or the sum of all samples with label ""); -1 when it is
// not registered (a vector with no sample yet counts as registered, 0).
func metric(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		sum := 0.0
		for _, m := range f.GetMetric() {
			v := value(m)
			if label == "" {
				sum += v
				continue
			}
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					return v
				}
			}
		}
		if label != "" {
			return -1
		}
		return sum
	}
	known := map[string]bool{"keel_events_inbox_quarantined_total": true}
	if known[name] {
		return 0 // a vector with no sample yet is not gathered
	}
	return -1
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return 0
}
