package keelrecon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsql/sqlfile"
	"github.com/keelwork/keel/keeltype"
)

// Defaults for Config fields.
const (
	// DefaultApproveAbove is the approval threshold for currencies that
	// Config.ApproveAbove does not list: 1,000.00 in a two-decimal currency.
	DefaultApproveAbove int64 = 100_000
	// KindRun is the job kind of a scheduled run.
	KindRun = "keel.recon.run"
	// ApprovalKind is the approval kind of a discrepancy's action.
	ApprovalKind = "recon.action"
	// SystemActor audits what runs do by themselves.
	SystemActor = "system:recon"
)

// Config configures Recon.
type Config struct {
	// ApproveAbove maps a currency to the impact (minor units, absolute)
	// above which an action needs a second operator. The key "" applies to
	// every currency not listed. Default {"": DefaultApproveAbove}.
	ApproveAbove map[string]int64
	// Queue runs scheduled runs. Default keel.DefaultQueue.
	Queue string
	// Logger for failed runs and auto-heals. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Recon runs reconcilers and keeps their discrepancies.
type Recon[TTx any] struct {
	db        keelsql.DB[TTx]
	q         sqlfile.Set
	cfg       Config
	client    atomic.Pointer[keel.Client[TTx]]
	approvals *Approvals[TTx]

	mu   sync.RWMutex
	recs map[string]Reconciler[TTx]
}

// New builds Recon on db (whose dialect's recon line must be migrated).
func New[TTx any](db keelsql.DB[TTx], cfg *Config) (*Recon[TTx], error) {
	if db == nil {
		return nil, errors.New("keelrecon: no database")
	}
	q, ok := queries[db.Dialect()]
	if !ok {
		return nil, fmt.Errorf("keelrecon: unsupported dialect %q", db.Dialect())
	}
	c := Config{}
	if cfg != nil {
		c = *cfg
	}
	if c.ApproveAbove == nil {
		c.ApproveAbove = map[string]int64{"": DefaultApproveAbove}
	}
	for cur, v := range c.ApproveAbove {
		if v < 0 || (cur != "" && !currencyRE.MatchString(cur)) {
			return nil, fmt.Errorf("keelrecon: Config.ApproveAbove[%q] = %d: want an ISO 4217 code (or \"\") and a threshold ≥ 0", cur, v)
		}
	}
	if c.Queue == "" {
		c.Queue = keel.DefaultQueue
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	r := &Recon[TTx]{db: db, q: q, cfg: c, recs: map[string]Reconciler[TTx]{}}
	r.approvals = &Approvals[TTx]{db: db, q: q, client: r.client.Load, now: r.now, kinds: map[string]Kind[TTx]{}}
	err := r.approvals.RegisterKind(Kind[TTx]{Name: ApprovalKind, ZH: "对账差异处理", EN: "Reconciliation action",
		Decided: r.decided, Execute: r.executeApproved})
	return r, err
}

// Approvals is the four-eyes capability, shared with other modules.
func (r *Recon[TTx]) Approvals() *Approvals[TTx] { return r.approvals }

// now is the clock in UTC, truncated to microseconds so that both databases
// store exactly the instant compared.
func (r *Recon[TTx]) now() time.Time { return r.cfg.Now().UTC().Truncate(time.Microsecond) }

// Register adds a reconciler; call it before Configure.
func (r *Recon[TTx]) Register(rec Reconciler[TTx]) error {
	if rec == nil || !nameRE.MatchString(rec.Name()) {
		return errors.New("keelrecon: a reconciler needs a name of [a-z0-9_.-]{1,64}")
	}
	if v := rec.RuleVersion(); v == "" || len(v) > 64 {
		return fmt.Errorf("keelrecon: reconciler %s: rule version must be 1..64 bytes", rec.Name())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.recs[rec.Name()]; dup {
		return fmt.Errorf("keelrecon: reconciler %s registered twice", rec.Name())
	}
	r.recs[rec.Name()] = rec
	return nil
}

// Reconciler returns a registered reconciler.
func (r *Recon[TTx]) Reconciler(name string) (Reconciler[TTx], error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	rec, ok := r.recs[name]
	if !ok {
		return nil, fmt.Errorf("reconciler %q: %w", name, ErrUnknownReconciler)
	}
	return rec, nil
}

// Info describes a registered reconciler.
type Info struct {
	Name        string `json:"name"`
	RuleVersion string `json:"rule_version"`
	Scheduled   bool   `json:"scheduled"`
}

// Reconcilers lists the registered reconcilers by name.
func (r *Recon[TTx]) Reconcilers() []Info {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Info, 0, len(r.recs))
	for _, rec := range r.recs {
		out = append(out, Info{Name: rec.Name(), RuleVersion: rec.RuleVersion(), Scheduled: rec.Schedule() != nil})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// RunArgs is a scheduled run: the tick is its cutoff.
type RunArgs struct {
	Reconciler string    `json:"reconciler"`
	Cutoff     time.Time `json:"cutoff"`
}

// Kind implements keel.JobArgs.
func (RunArgs) Kind() string { return KindRun }

// Configure registers the run worker and one periodic job per scheduled
// reconciler: the engine inserts it once per tick across instances.
func (r *Recon[TTx]) Configure(cfg *keel.Config) error {
	if cfg.Workers == nil {
		cfg.Workers = keel.NewWorkers()
	}
	if cfg.Queues == nil {
		cfg.Queues = map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: keel.DefaultMaxWorkers}}
	}
	if _, ok := cfg.Queues[r.cfg.Queue]; !ok {
		cfg.Queues[r.cfg.Queue] = keel.QueueConfig{MaxWorkers: 2}
	}
	if err := keel.AddWorkerSafely[RunArgs](cfg.Workers, keel.WorkerFunc[RunArgs](r.work)); err != nil {
		return fmt.Errorf("keelrecon: %w", err)
	}
	for _, info := range r.Reconcilers() {
		rec, _ := r.Reconciler(info.Name)
		sched := rec.Schedule()
		if sched == nil {
			continue
		}
		name, queue := info.Name, r.cfg.Queue
		cfg.PeriodicJobs = append(cfg.PeriodicJobs, &keel.PeriodicJob{Name: "recon." + name, Schedule: sched,
			Construct: func(tick time.Time) (keel.JobArgs, *keel.InsertOpts) {
				return RunArgs{Reconciler: name, Cutoff: tick.UTC()}, &keel.InsertOpts{Queue: queue, MaxAttempts: 3}
			}})
	}
	return nil
}

// Start keeps the engine client, which audits every step.
func (r *Recon[TTx]) Start(_ context.Context, client *keel.Client[TTx]) error {
	if client == nil {
		return errors.New("keelrecon: Start needs a client")
	}
	r.client.Store(client)
	return nil
}

func (r *Recon[TTx]) engine(ctx context.Context) (*keel.Client[TTx], error) {
	if c := r.client.Load(); c != nil {
		return c, nil
	}
	if c, err := keel.ClientFromContext[TTx](ctx); err == nil {
		r.client.CompareAndSwap(nil, c)
		return c, nil
	}
	return nil, errNotStarted
}

func (r *Recon[TTx]) work(ctx context.Context, job *keel.Job[RunArgs]) error {
	if _, err := r.engine(ctx); err != nil {
		return err
	}
	_, err := r.run(keel.WithActor(ctx, SystemActor), job.Args.Reconciler, job.Args.Cutoff, "schedule")
	return err
}

// threshold is the approval threshold of a currency.
func (r *Recon[TTx]) threshold(currency string) int64 {
	if v, ok := r.cfg.ApproveAbove[currency]; ok {
		return v
	}
	return r.cfg.ApproveAbove[""]
}

// NeedsApproval reports whether d's action needs a second operator: the
// reconciler says so, or its impact is above the currency's threshold.
func (r *Recon[TTx]) NeedsApproval(d *Discrepancy) bool {
	impact := d.Impact
	if impact < 0 {
		impact = -impact
	}
	return d.NeedsApproval || impact > r.threshold(d.Currency)
}

// keyOf is a discrepancy's identity.
type keyOf struct {
	class Class
	key   string
}

// checkOutput validates a reconciler's result before anything is applied.
func checkOutput(out *RunOutput) error {
	if out.Compared < 0 {
		return fmt.Errorf("%w: compared count is negative", keeltype.ErrInvalidArgument)
	}
	if out.Scope != nil {
		if err := checkText("scope", out.Scope.Name, 200); err != nil {
			return err
		}
		if out.Scope.Covers == nil {
			return fmt.Errorf("%w: a partial run's scope needs Covers", keeltype.ErrInvalidArgument)
		}
	}
	seen := map[keyOf]bool{}
	for i := range out.Discrepancies {
		d := &out.Discrepancies[i]
		if !d.Class.Valid() {
			return fmt.Errorf("%w: discrepancy %q has unknown class %q", keeltype.ErrInvalidArgument, d.Key, d.Class)
		}
		if err := checkText("discrepancy key", d.Key, 200); err != nil {
			return err
		}
		if seen[keyOf{d.Class, d.Key}] {
			return fmt.Errorf("%w: discrepancy %s/%s reported twice", keeltype.ErrInvalidArgument, d.Class, d.Key)
		}
		seen[keyOf{d.Class, d.Key}] = true
		if err := checkText("suggested action", d.SuggestedAction, 500); err != nil {
			return err
		}
		if d.Currency != "" && !currencyRE.MatchString(d.Currency) {
			return fmt.Errorf("%w: discrepancy %s: currency %q", keeltype.ErrInvalidArgument, d.Key, d.Currency)
		}
		if d.Impact != 0 && d.Currency == "" {
			return fmt.Errorf("%w: discrepancy %s: an impact needs its currency", keeltype.ErrInvalidArgument, d.Key)
		}
		if err := checkEvidence(d); err != nil {
			return err
		}
	}
	return nil
}
