package keel

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelwork/keel/keeltype"
)

// Defaults for Config fields. Each is documented on its field.
const (
	DefaultQueue             = "default"
	DefaultMaxWorkers        = 100
	DefaultLeaseDuration     = 30 * time.Second
	DefaultJobTimeout        = time.Minute
	DefaultMaxAttempts       = 25
	DefaultPriority          = 2
	DefaultFetchPollInterval = time.Second
	DefaultCompleterBatch    = 1000
	DefaultCompleterFlush    = 10 * time.Millisecond
	DefaultLeaderTTL         = 5 * time.Second
	DefaultPromoteInterval   = 250 * time.Millisecond
	DefaultRescueInterval    = time.Second
	DefaultRetention         = 24 * time.Hour
	DefaultPruneInterval     = time.Minute
	DefaultStopHandBack      = 10 * time.Second
	DefaultPriorityAgeing    = 5 * time.Minute
	DefaultBatchPreviewTTL   = 10 * time.Minute
)

// QueueConfig configures one queue a client works.
type QueueConfig struct {
	// MaxWorkers is how many jobs of this queue run at once in this client.
	// Default DefaultMaxWorkers.
	MaxWorkers int
	// FlowKeys, if set, restricts this client to the jobs of this queue
	// whose flow key is in the returned set; it is called on every fetch.
	// A gateway that holds some customers' connections sets it to those
	// customers, so that only an instance able to deliver claims a
	// delivery. An empty set claims nothing. After the set grows, call
	// Client.WakeQueue so the new keys are fetched at once.
	FlowKeys func() []string
}

// Config configures a Client. The zero value of every field takes the
// default named on it.
type Config struct {
	// ID identifies this client as lease owner and leader candidate. Default:
	// host-pid-random. Must be unique among running clients.
	ID string
	// Queues this client works, with their concurrency. Nil with Workers set
	// means {"default": {MaxWorkers: DefaultMaxWorkers}}; nil without
	// Workers makes an insert-only client.
	Queues map[string]QueueConfig
	// Workers registry; nil for an insert-only client.
	Workers *Workers
	// LeaseDuration a claim lasts without heartbeat. Default 30s. Heartbeats
	// run every LeaseDuration/3.
	LeaseDuration time.Duration
	// JobTimeout bounds one attempt unless the kind says otherwise. Default
	// 1m; negative disables.
	JobTimeout time.Duration
	// MaxAttempts is the default attempt budget. Default 25.
	MaxAttempts int
	// RetryPolicy computes backoff. Default: exponential, full jitter, 1s
	// base, 1h cap.
	RetryPolicy RetryPolicy
	// FetchPollInterval is the fallback poll when no notification arrives.
	// Default 1s.
	FetchPollInterval time.Duration
	// DisableStartOnInsert turns off starting on insert. By default a job
	// this client inserts (Insert, InsertMany of one job, outside a
	// caller's transaction) into a queue that is idle here (no backlog
	// known, nothing fetched ahead) takes one of this client's free worker
	// slots and is inserted already claimed: stored running, leased and
	// fenced like any claimed job, in the insert's one commit, where
	// otherwise the insert and the claim each wait for the database to
	// flush its log (docs/architecture.md). Jobs with an idempotency key, a
	// flow key, a batch or a run time, queues this client does not work,
	// and drivers without keeldriver.InsertClaimer take the usual path. The
	// usual path wakes this process's own fetchers first, so the inserting
	// instance mostly claims its own jobs either way; set this when jobs
	// must be inserted available and left to whichever instance claims
	// first.
	DisableStartOnInsert bool
	// CompleterBatchSize flushes completions once this many are pending.
	// Default 1000.
	CompleterBatchSize int
	// CompleterFlushInterval flushes pending completions at least this often.
	// Default 10ms: long enough to batch a busy queue's completions, short
	// enough that a finished job leaves the running state promptly.
	CompleterFlushInterval time.Duration
	// LeaderTTL is the leadership lease; a dead leader is replaced within
	// about this long. Default 5s.
	LeaderTTL time.Duration
	// PromoteInterval is how often due scheduled/retryable/unknown jobs and
	// expired waits become available. Default 250ms.
	PromoteInterval time.Duration
	// RescueInterval is how often expired leases are returned. Default 1s.
	RescueInterval time.Duration
	// Retention keeps final jobs this long before pruning. Default 24h;
	// negative disables pruning.
	Retention time.Duration
	// PruneInterval is how often pruning runs. Default 1m.
	PruneInterval time.Duration
	// FlowLimits are upserted at Start (configuration in code); limits can
	// also be changed at run time through Client.FlowLimitSet.
	FlowLimits []keeltype.FlowLimit
	// PriorityAgeing raises an available job's priority by one level for
	// every PriorityAgeing it has waited, so low priority never starves.
	// Default 5m; negative disables.
	PriorityAgeing time.Duration
	// PeriodicJobs are inserted once per tick across all clients.
	PeriodicJobs []*PeriodicJob
	// DisableMaintenance keeps this client out of leader election (and so
	// out of rescue, promotion, scheduling and pruning).
	DisableMaintenance bool
	// StopHandBack bounds how long a hard stop waits for cancelled jobs to
	// return before giving up (their leases then expire). Default 10s.
	StopHandBack time.Duration
	// BatchSigningKey signs batch preview tokens (HMAC-SHA256). Every
	// instance that creates batches from previews made by another must hold
	// the same key. Batch previews are refused while it is empty.
	BatchSigningKey []byte
	// BatchPreviewTTL is how long a preview token stays valid. Default 10m.
	BatchPreviewTTL time.Duration
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the client's Prometheus metrics; nil registers
	// nothing (metrics are still readable through Client.Metrics).
	Registerer prometheus.Registerer
}

// validName reports whether s is a kind or queue name: 1-128 bytes of
// A-Z a-z 0-9 _ . : -. Every insert checks its kind and queue, so this is a
// byte loop rather than a regular expression (which was 3% of the process's
// CPU in a continuous run, bench --cpuprofile).
func validName(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '.', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

func (c *Config) withDefaults() *Config {
	out := *c
	if out.ID == "" {
		host, _ := os.Hostname()
		out.ID = fmt.Sprintf("%s-%d-%04x", host, os.Getpid(), rand.IntN(0x10000))
	}
	if out.Queues == nil && out.Workers != nil {
		out.Queues = map[string]QueueConfig{DefaultQueue: {MaxWorkers: DefaultMaxWorkers}}
	}
	queues := make(map[string]QueueConfig, len(out.Queues))
	for name, q := range out.Queues {
		if q.MaxWorkers == 0 {
			q.MaxWorkers = DefaultMaxWorkers
		}
		queues[name] = q
	}
	out.Queues = queues
	setDefault(&out.LeaseDuration, DefaultLeaseDuration)
	setDefault(&out.JobTimeout, DefaultJobTimeout)
	setDefault(&out.MaxAttempts, DefaultMaxAttempts)
	setDefault(&out.FetchPollInterval, DefaultFetchPollInterval)
	setDefault(&out.CompleterBatchSize, DefaultCompleterBatch)
	setDefault(&out.CompleterFlushInterval, DefaultCompleterFlush)
	setDefault(&out.LeaderTTL, DefaultLeaderTTL)
	setDefault(&out.PromoteInterval, DefaultPromoteInterval)
	setDefault(&out.RescueInterval, DefaultRescueInterval)
	setDefault(&out.Retention, DefaultRetention)
	setDefault(&out.PruneInterval, DefaultPruneInterval)
	setDefault(&out.StopHandBack, DefaultStopHandBack)
	setDefault(&out.PriorityAgeing, DefaultPriorityAgeing)
	setDefault(&out.BatchPreviewTTL, DefaultBatchPreviewTTL)
	if out.RetryPolicy == nil {
		out.RetryPolicy = &JitterRetryPolicy{Base: time.Second, Cap: time.Hour}
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	return &out
}

func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// validate says which field is wrong.
func (c *Config) validate() error {
	for name, q := range c.Queues {
		if !validName(name) {
			return fmt.Errorf("%w: Queues: bad queue name %q (1-128 of A-Z a-z 0-9 _ . : -)", errConfig, name)
		}
		if q.MaxWorkers < 1 || q.MaxWorkers > 100000 {
			return fmt.Errorf("%w: Queues[%q].MaxWorkers must be 1..100000, got %d", errConfig, name, q.MaxWorkers)
		}
	}
	if len(c.Queues) > 0 && c.Workers == nil {
		return fmt.Errorf("%w: Queues set but Workers is nil", errConfig)
	}
	checks := []struct {
		name string
		d    time.Duration
		min  time.Duration
	}{
		{"LeaseDuration", c.LeaseDuration, 100 * time.Millisecond},
		{"FetchPollInterval", c.FetchPollInterval, time.Millisecond},
		{"CompleterFlushInterval", c.CompleterFlushInterval, time.Microsecond},
		{"LeaderTTL", c.LeaderTTL, 100 * time.Millisecond},
		{"PromoteInterval", c.PromoteInterval, time.Millisecond},
		{"RescueInterval", c.RescueInterval, time.Millisecond},
		{"PruneInterval", c.PruneInterval, time.Millisecond},
		{"StopHandBack", c.StopHandBack, 0},
	}
	for _, ch := range checks {
		if ch.d < ch.min {
			return fmt.Errorf("%w: %s must be at least %s, got %s", errConfig, ch.name, ch.min, ch.d)
		}
	}
	if c.MaxAttempts < 1 {
		return fmt.Errorf("%w: MaxAttempts must be at least 1, got %d", errConfig, c.MaxAttempts)
	}
	if c.CompleterBatchSize < 1 || c.CompleterBatchSize > 10000 {
		return fmt.Errorf("%w: CompleterBatchSize must be 1..10000, got %d", errConfig, c.CompleterBatchSize)
	}
	for i := range c.FlowLimits {
		if err := ValidateFlowLimit(&c.FlowLimits[i]); err != nil {
			return fmt.Errorf("%w: FlowLimits[%d]: %v", errConfig, i, err)
		}
	}
	return c.validatePeriodic()
}

func (c *Config) validatePeriodic() error {
	seen := map[string]bool{}
	for i, p := range c.PeriodicJobs {
		if p == nil || p.Name == "" || p.Schedule == nil || p.Construct == nil {
			return fmt.Errorf("%w: PeriodicJobs[%d] needs Name, Schedule and Construct", errConfig, i)
		}
		if seen[p.Name] {
			return fmt.Errorf("%w: PeriodicJobs[%d]: name %q used twice", errConfig, i, p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}
