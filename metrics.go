package keel

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the client's Prometheus collectors. Names are stable: alerts
// and dashboards depend on them.
type Metrics struct {
	Claimed         *prometheus.CounterVec   // queue
	Completed       *prometheus.CounterVec   // queue, kind
	Failed          *prometheus.CounterVec   // queue, kind, class
	Retried         *prometheus.CounterVec   // queue, kind
	Outcomes        *prometheus.CounterVec   // queue, kind, state (waiting, snoozed, manual, ...)
	StaleFence      *prometheus.CounterVec   // kind
	CommitUncertain *prometheus.CounterVec   // kind, found (committed, handed_back): CompleteTx commits settled after an error
	LeaseExpired    prometheus.Counter       // rescued by this client while leader
	LeaseLost       prometheus.Counter       // heartbeats that found a lease gone
	ClaimLatency    *prometheus.HistogramVec // queue: seconds one claim statement took
	StartLatency    *prometheus.HistogramVec // queue: run_at → start, seconds
	QueueDepth      *prometheus.GaugeVec     // queue, state
	OldestAvailable *prometheus.GaugeVec     // queue: age in seconds
	Leader          prometheus.Gauge         // 1 while this client leads

	Throttled           *prometheus.CounterVec // key: claims cut short by a limit
	TokenWait           *prometheus.CounterVec // key: seconds claims waited for tokens
	FlowRunning         *prometheus.GaugeVec   // key
	FlowBreaker         *prometheus.GaugeVec   // key: 0 closed, 1 half-open, 2 open
	FlowPaused          *prometheus.GaugeVec   // key: 1 paused
	FlowFailures        *prometheus.GaugeVec   // key: consecutive real failures
	FlowOldestAvailable *prometheus.GaugeVec   // key: seconds
	AutoPaused          *prometheus.CounterVec // key
	BatchDrift          prometheus.Counter     // reconciliations that found drift
}

func newMetrics() *Metrics {
	ns := "keel"
	return &Metrics{
		Claimed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "jobs_claimed_total",
			Help: "Jobs claimed by this client."}, []string{"queue"}),
		Completed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "jobs_completed_total",
			Help: "Jobs completed by this client."}, []string{"queue", "kind"}),
		Failed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "jobs_failed_total",
			Help: "Failed attempts by error class."}, []string{"queue", "kind", "class"}),
		Retried: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "jobs_retried_total",
			Help: "Failed attempts scheduled for retry."}, []string{"queue", "kind"}),
		Outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "job_outcomes_total",
			Help: "Attempt outcomes by resulting state."}, []string{"queue", "kind", "state"}),
		StaleFence: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "stale_fence_rejections_total",
			Help: "Commits rejected because the fence was no longer current."}, []string{"kind"}),
		CommitUncertain: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "commit_uncertain_total",
			Help: "CompleteTx transactions whose worker returned an error, by what the fenced check found."}, []string{"kind", "found"}),
		LeaseExpired: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "lease_expiries_total",
			Help: "Running jobs returned by the rescuer after their lease expired."}),
		LeaseLost: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "leases_lost_total",
			Help: "Running jobs whose heartbeat found the lease gone."}),
		ClaimLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "claim_duration_seconds",
			Help: "Duration of one claim statement.", Buckets: prometheus.ExponentialBuckets(0.0002, 2, 14)}, []string{"queue"}),
		StartLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "job_start_delay_seconds",
			Help: "Delay from a job's run_at to its start.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}, []string{"queue"}),
		QueueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "queue_jobs",
			Help: "Jobs per queue and state (sampled by the leader)."}, []string{"queue", "state"}),
		OldestAvailable: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "queue_oldest_available_seconds",
			Help: "Age of the oldest available job per queue (sampled by the leader)."}, []string{"queue"}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "leader",
			Help: "1 while this client is the maintenance leader."}),
		Throttled: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "flow_throttled_claims_total",
			Help: "Claims that got fewer jobs than their share because of a flow limit."}, []string{"key"}),
		TokenWait: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "flow_token_wait_seconds_total",
			Help: "Time claims of a key waited for rate tokens."}, []string{"key"}),
		FlowRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "flow_running_jobs",
			Help: "Running jobs per flow key (sampled by the leader)."}, []string{"key"}),
		FlowBreaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "flow_breaker_state",
			Help: "Breaker per flow key: 0 closed, 1 half-open, 2 open."}, []string{"key"}),
		FlowPaused: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "flow_paused",
			Help: "1 while the flow key is paused."}, []string{"key"}),
		FlowFailures: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "flow_consecutive_failures",
			Help: "Consecutive real failures per flow key."}, []string{"key"}),
		FlowOldestAvailable: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "flow_oldest_available_seconds",
			Help: "Age of the oldest available job per flow key."}, []string{"key"}),
		AutoPaused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "flow_autopaused_total",
			Help: "Flow keys paused automatically by consecutive failures."}, []string{"key"}),
		BatchDrift: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "batch_counter_drift_total",
			Help: "Batch reconciliations whose recount disagreed with the counters (should stay 0)."}),
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Claimed, m.Completed, m.Failed, m.Retried, m.Outcomes, m.StaleFence, m.CommitUncertain,
		m.LeaseExpired, m.LeaseLost, m.ClaimLatency, m.StartLatency, m.QueueDepth, m.OldestAvailable, m.Leader,
		m.Throttled, m.TokenWait, m.FlowRunning, m.FlowBreaker, m.FlowPaused, m.FlowFailures, m.FlowOldestAvailable,
		m.AutoPaused, m.BatchDrift}
}

func (m *Metrics) register(reg prometheus.Registerer) error {
	for _, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
