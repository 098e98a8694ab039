// Package export is Keel's asynchronous large-export module: an export task
// fixes a consistent cut of the orders it owns (a data version), splits it
// into shards by stable id ranges, each shard an engine job whose cursor,
// counts and digest state commit with the engine's fence; shards stream in
// bounded keyset batches into part objects with stable keys; a merger keyed
// by (task, merge generation) checks and concatenates them into the final
// CSV or XLSX object, verifies it four ways and publishes it by a
// conditional update naming its digest. See docs/export.md.
package export

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"gocloud.dev/blob"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelsql/sqlfile"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
)

// Queues the module's jobs run in.
const (
	QueueShards = "export"
	QueueMerge  = "export_merge"
)

// Hooks let tests stand in the failure windows the module must survive.
// Each is nil in production.
type Hooks struct {
	// BeforeChunk runs before each chunk of a shard is written (a test
	// freezes a worker here).
	BeforeChunk func(ctx context.Context, task int64, shard, chunk int)
	// AfterChunkUpload runs after a chunk object was written and before its
	// commit; an error stands in for the commit failing.
	AfterChunkUpload func(task int64, shard, chunk int) error
	// ChunkWriter wraps the writer of a chunk upload; an error from it
	// stands in for an upload that timed out.
	FailUpload func(task int64, shard, chunk int) error
	// BeforeCommit runs before a chunk's commit, after its upload (a test
	// freezes a worker here, past its lease).
	BeforeCommit func(task int64, shard, chunk int)
	// AfterFinalUpload runs after the final object was written, before the
	// publish; an error stands in for the publish failing.
	AfterFinalUpload func(task int64, gen int) error
	// Notice runs when a completion notice is delivered; an error fails the
	// delivery (it is retried by the events backbone).
	Notice func(task int64) error
	// Heap replaces the heap reading of the watermark.
	Heap func() uint64
}

// Option configures New.
type Option func(*options)

type options struct {
	bucket *blob.Bucket
	hooks  Hooks
	owner  string
}

// WithBucket gives the module a bucket instead of the one its settings open.
func WithBucket(b *blob.Bucket) Option { return func(o *options) { o.bucket = b } }

// WithOwner names this instance in the shard table (default host-pid).
func WithOwner(name string) Option { return func(o *options) { o.owner = name } }

// WithHooks sets test hooks.
func WithHooks(h Hooks) Option { return func(o *options) { o.hooks = h } }

// Module is the export module on one database.
type Module[TTx any] struct {
	*module.Base[TTx]
	q      sqlfile.Set
	set    settings
	bucket *blob.Bucket
	own    bool // the module opened bucket and closes it
	hooks  Hooks
	events *keelevents.Events[TTx]
	owner  string

	keys      atomic.Pointer[[]string] // flow keys of tenants with running shards
	oldKeys   atomic.Pointer[[]string] // flow keys of tenants whose old tasks wait for a shard start
	resMu     sync.Mutex
	debt      int          // starts owed to old tasks, in hundredths (see claimKeys)
	paused    atomic.Bool  // the heap watermark holds claims back
	pauses    atomic.Int64 // times the watermark paused claiming
	peakHeap  atomic.Uint64
	watermark atomic.Uint64 // bytes

	statMu sync.Mutex
	stats  map[string]int64 // settlement and refusal counters (also metrics)
}

// New builds the module.
func New[TTx any](h *module.Host[TTx], opts ...Option) (*Module[TTx], error) {
	b, err := module.NewBase(Name, h)
	if err != nil {
		return nil, err
	}
	q, err := b.Queries(queryFiles, "queries")
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	st := b.Settings()
	set := readSettings(st)
	if err := st.Err(); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	var o options
	for _, f := range opts {
		f(&o)
	}
	host, _ := os.Hostname()
	m := &Module[TTx]{Base: b, q: q, set: set, hooks: o.hooks, events: h.Events,
		owner: fmt.Sprintf("%s-%d", host, os.Getpid()), stats: map[string]int64{}}
	if o.owner != "" {
		m.owner = o.owner
	}
	m.watermark.Store(uint64(set.watermarkMB) << 20)
	m.keys.Store(&[]string{})
	m.oldKeys.Store(&[]string{})
	m.bucket = o.bucket
	if m.bucket == nil {
		if m.bucket, err = openBucket(context.Background(), set); err != nil {
			return nil, fmt.Errorf("export: opening the object store: %w", err)
		}
		m.own = true
	}
	if m.events != nil {
		if err := m.consumeNotices(); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
	}
	if err := m.registerMetrics(); err != nil {
		return nil, err
	}
	return m, nil
}

// Name is the module's name.
func (m *Module[TTx]) Name() string { return Name }

// Lines are the module's migration lines.
func (m *Module[TTx]) Lines() []keelmigrate.Line { return Lines(m.DB.Dialect()) }

// Bucket is the object store the module writes.
func (m *Module[TTx]) Bucket() *blob.Bucket { return m.bucket }

// Concurrency is how many shards this instance runs at once.
func (m *Module[TTx]) Concurrency() int { return m.set.concurrency() }

// SetHeapWatermark changes the heap watermark at run time (bytes).
func (m *Module[TTx]) SetHeapWatermark(b uint64) { m.watermark.Store(b) }

// Configure registers the workers, the queues (shard concurrency from the
// memory budget) and the orphan cleaner.
func (m *Module[TTx]) Configure(cfg *keel.Config) error {
	if cfg.Workers == nil {
		cfg.Workers = keel.NewWorkers()
	}
	for _, err := range []error{
		keel.AddWorkerSafely[ShardArgs](cfg.Workers, keel.WorkerFunc[ShardArgs](m.workShard)),
		keel.AddWorkerSafely[MergeArgs](cfg.Workers, keel.WorkerFunc[MergeArgs](m.workMerge)),
		keel.AddWorkerSafely[CleanArgs](cfg.Workers, keel.WorkerFunc[CleanArgs](m.workClean)),
	} {
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	if cfg.Queues == nil {
		cfg.Queues = map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: keel.DefaultMaxWorkers}}
	}
	cfg.Queues[QueueShards] = keel.QueueConfig{MaxWorkers: m.set.concurrency(), FlowKeys: m.claimKeys}
	// A running-shard limit per tenant (across instances). Besides bounding
	// one tenant, it makes the engine claim shards only into free worker
	// slots, so the reserved share for old tasks steers starts, not claims
	// that sit in a fetch-ahead buffer (see claimKeys).
	cfg.FlowLimits = append(cfg.FlowLimits, keeltype.FlowLimit{Pattern: flowKey("*"), Queue: QueueShards, MaxRunning: m.set.tenantShards})
	cfg.Queues[QueueMerge] = keel.QueueConfig{MaxWorkers: m.set.mergeWorkers}
	cfg.PeriodicJobs = append(cfg.PeriodicJobs, &keel.PeriodicJob{Name: "export.orphans",
		Schedule: keel.Every(m.set.orphanEvery),
		Construct: func(time.Time) (keel.JobArgs, *keel.InsertOpts) {
			return CleanArgs{}, &keel.InsertOpts{Queue: QueueMerge, MaxAttempts: 3}
		}})
	return nil
}

// Start binds the engine client and runs the tenant-key refresher (and,
// with Host.Demo, the demo data and exports).
func (m *Module[TTx]) Start(ctx context.Context, c *keel.Client[TTx]) error {
	if err := m.Bind(c); err != nil {
		return err
	}
	if _, err := m.Life.Start(ctx); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	m.refreshKeys(ctx)
	m.Life.Go(m.keyLoop)
	if m.Demo {
		m.Life.Go(m.runDemo)
	}
	return nil
}

// Stop ends the background work (and closes a bucket the module opened).
func (m *Module[TTx]) Stop(ctx context.Context) error {
	err := m.Life.Stop(ctx)
	if m.own {
		err = errors.Join(err, m.bucket.Close())
	}
	return err
}

func (m *Module[TTx]) count(name string) {
	m.statMu.Lock()
	m.stats[name]++
	m.statMu.Unlock()
}

// Stat is one of the module's counters: settle_match, settle_absent,
// settle_mismatch, stale_refused, final_match, final_mismatch, orphans_marked,
// orphans_deleted.
func (m *Module[TTx]) Stat(name string) int64 {
	m.statMu.Lock()
	defer m.statMu.Unlock()
	return m.stats[name]
}
