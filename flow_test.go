package keel_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

type keyArgs struct {
	Mode string `json:"mode,omitempty"`
}

func (keyArgs) Kind() string { return "test.key" }

// TestFairnessAcrossKeys: a key with a huge backlog does not delay a key
// with a few jobs.
func TestFairnessAcrossKeys(t *testing.T) {
	both(t, testFairness[pgx.Tx], testFairness[*sql.Tx])
}

func testFairness[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	const small = 50
	// The acceptance figure is 50k on PostgreSQL. Pure-Go SQLite under the
	// race detector inserts and claims about ten times slower, so it gets a
	// 10k backlog: still 200 times B's, and the same rotation is proven.
	bigBacklog, bound := 50000, 2*time.Second
	if d.Dialect() == "sqlite" {
		// Each claim cycle of pure-Go SQLite under -race is several times
		// a PostgreSQL one, so B's four fair-share cycles get a wider bound.
		bigBacklog, bound = 10000, 5*time.Second
	}
	var smallStarted atomic.Int32
	lastSmall := make(chan time.Time, 1)
	ws := keel.NewWorkers()
	keel.AddWorker(ws, keel.WorkerFunc[keyArgs](func(ctx context.Context, job *keel.Job[keyArgs]) error {
		if job.FlowKey == "B" && smallStarted.Add(1) == small {
			lastSmall <- time.Now()
		}
		return nil
	}))
	c := startClient(t, d, &keel.Config{})
	insertKey(t, c, "A", bigBacklog)
	w := startClient(t, d, fastConfig(ws))
	waitFor(t, 30*time.Second, "A to start draining", func() bool {
		s, err := w.FlowKeyStats(ctx, []string{"A"})
		return err == nil && len(s) == 1 && s[0].Counts[keeltype.JobStateAvailable] < int64(bigBacklog)
	})
	firstInsert := time.Now()
	insertKey(t, c, "B", small)
	select {
	case at := <-lastSmall:
		took := at.Sub(firstInsert)
		s, _ := w.FlowKeyStats(ctx, []string{"A"})
		left := s[0].Counts[keeltype.JobStateAvailable]
		t.Logf("B's %d jobs all started %s after B's first insert; A still had %d available", small, took, left)
		// Behind A's backlog, B would start only after A's thousands. The
		// share A ran meanwhile proves the rotation whatever the machine's
		// speed; the time bound is the PostgreSQL acceptance figure, and
		// on SQLite under -race on loaded cores only reported (it has
		// missed 5 s by 0.16 s with A still holding 96% of its backlog).
		if ran := int64(bigBacklog) - left; ran > int64(bigBacklog)/5 {
			t.Fatalf("A ran %d of its %d jobs while B's %d waited: B queued behind A's backlog", ran, bigBacklog, small)
		}
		if took > bound && d.Dialect() != "sqlite" {
			t.Fatalf("B waited %s behind A's backlog, want ≤ %s", took, bound)
		}
		if s[0].Counts[keeltype.JobStateAvailable] == 0 {
			t.Fatalf("A drained before B finished: the test proved nothing")
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("B's jobs did not all start")
	}
}

func insertKey[TTx any](t *testing.T, c *keel.Client[TTx], key string, n int) {
	t.Helper()
	for done := 0; done < n; done += 5000 {
		batch := make([]keel.InsertParams, min(5000, n-done))
		for i := range batch {
			batch[i] = keel.InsertParams{Args: keyArgs{}, Opts: &keel.InsertOpts{FlowKey: key}}
		}
		if _, err := c.InsertMany(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOverlappingClaimersNeverExceedLimit: two claimers released at the
// same instant, over and over, never take more tokens than the bucket holds.
func TestOverlappingClaimersNeverExceedLimit(t *testing.T) {
	both(t, testOverlap[pgx.Tx], testOverlap[*sql.Tx])
}

func testOverlap[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	admin := startClient(t, d, &keel.Config{})
	// Rate 0.001/s with burst 2: a fresh key holds exactly 3 tokens and no
	// key earns another during the test.
	if _, err := admin.FlowLimitSet(ctx, &keeltype.FlowLimit{Pattern: "round-*", Rate: 0.001, Burst: 2}, "test"); err != nil {
		t.Fatal(err)
	}
	var claimed sync.Map // job id → claimer
	var clients []*keel.Client[TTx]
	var perRound [2]atomic.Int32
	for i := range 2 {
		ws := keel.NewWorkers()
		keel.AddWorker(ws, keel.WorkerFunc[keyArgs](func(ctx context.Context, job *keel.Job[keyArgs]) error {
			if _, dup := claimed.LoadOrStore(job.ID, i); dup {
				t.Errorf("job %d claimed twice", job.ID)
			}
			perRound[i].Add(1)
			return nil
		}))
		cfg := fastConfig(ws)
		cfg.FetchPollInterval = 100 * time.Millisecond
		cfg.DisableMaintenance = true
		clients = append(clients, startClient(t, d, cfg))
	}
	for round := range 20 {
		key := fmt.Sprintf("round-%02d", round)
		before := perRound[0].Load() + perRound[1].Load()
		insertKey(t, admin, key, 10) // the insert notification wakes both claimers at once
		waitFor(t, 30*time.Second, "the round's tokens to be used", func() bool {
			return perRound[0].Load()+perRound[1].Load()-before >= 3
		})
		s, err := admin.FlowKeyStats(ctx, []string{key})
		if err != nil {
			t.Fatal(err)
		}
		if got := 10 - s[0].Counts[keeltype.JobStateAvailable]; got != 3 {
			t.Fatalf("round %d: %d jobs claimed from a 3-token bucket", round, got)
		}
	}
}

// TestBreakerOpensAndProbes: a failing key opens its breaker while healthy
// keys keep going; after the cool-down exactly K probes run; a successful
// probe closes it.
func TestBreakerOpensAndProbes(t *testing.T) {
	both(t, testBreaker[pgx.Tx], testBreaker[*sql.Tx])
}

func testBreaker[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	var failing atomic.Bool
	failing.Store(true)
	var mu sync.Mutex
	var badAttempts []time.Time
	var seen []string // the bad key's breaker state as each attempt starts
	var healthy atomic.Int32
	var c *keel.Client[TTx]
	ws := keel.NewWorkers()
	keel.AddWorker(ws, keel.WorkerFunc[keyArgs](func(ctx context.Context, job *keel.Job[keyArgs]) error {
		if job.FlowKey != "bad" {
			healthy.Add(1)
			return nil
		}
		k, err := c.FlowKeyGet(ctx, "bad")
		state := "none"
		if err == nil {
			state = fmt.Sprintf("%s/%d", k.BreakerState, k.BreakerProbesLeft)
		}
		mu.Lock()
		badAttempts = append(badAttempts, time.Now())
		seen = append(seen, state)
		mu.Unlock()
		if failing.Load() {
			return errors.New("counterpart down")
		}
		return nil
	}))
	cfg := fastConfig(ws)
	cfg.Queues = map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 1}}
	const cooldown = time.Second
	cfg.FlowLimits = []keeltype.FlowLimit{{Pattern: "bad", BreakerFailures: 3, BreakerCooldown: cooldown, BreakerProbes: 2}}
	c = startClient(t, d, cfg)
	bad := func() int { mu.Lock(); defer mu.Unlock(); return len(badAttempts) }
	insertKeyOpts(t, c, "bad", 40, &keel.InsertOpts{FlowKey: "bad", MaxAttempts: 1})
	var firstOpen time.Time
	waitFor(t, 30*time.Second, "the breaker to open", func() bool {
		k, err := c.FlowKeyGet(ctx, "bad")
		if err == nil && k.BreakerState == keeltype.BreakerOpen {
			firstOpen = *k.BreakerOpenedAt
			return true
		}
		return false
	})
	if n := bad(); n != 3 {
		t.Fatalf("breaker opened after %d failures, want 3", n)
	}
	mu.Lock()
	if seen[0] != "none" && !strings.HasPrefix(seen[0], "closed") {
		t.Fatalf("first attempt saw breaker %s", seen[0])
	}
	mu.Unlock()
	// Healthy keys keep flowing while it is open.
	before := healthy.Load()
	insertKey(t, c, "good-1", 20)
	insertKey(t, c, "good-2", 20)
	waitFor(t, 30*time.Second, "healthy keys to run", func() bool { return healthy.Load()-before == 40 })
	var reopened time.Time
	waitFor(t, 30*time.Second, "the probes to run, fail and reopen the breaker", func() bool {
		k, err := c.FlowKeyGet(ctx, "bad")
		if err == nil && k.BreakerState == keeltype.BreakerOpen && k.BreakerOpenedAt.After(firstOpen) {
			reopened = *k.BreakerOpenedAt
			return true
		}
		return false
	})
	// Every attempt after the breaker opened must have started while it
	// was half-open, and the first cycle is exactly two probes: the first
	// sees two probes granted less its own, the second the last one.
	mu.Lock()
	after := append([]string(nil), seen[3:]...)
	mu.Unlock()
	if len(after) < 2 || after[0] != "half_open/1" || after[1] != "half_open/0" {
		t.Fatalf("attempts after opening saw %v (all: %v), want the first cycle to be exactly [half_open/1 half_open/0]", after, seen)
	}
	for i, st := range after {
		if !strings.HasPrefix(st, "half_open/") {
			t.Fatalf("attempt %d ran while the breaker was %s: only probes may run", i+4, st)
		}
	}
	_ = reopened
	failing.Store(false)
	waitFor(t, 30*time.Second, "a probe to succeed and close the breaker", func() bool {
		k, err := c.FlowKeyGet(ctx, "bad")
		return err == nil && k.BreakerState == keeltype.BreakerClosed
	})
	waitFor(t, 30*time.Second, "the rest of the bad key's jobs", func() bool { return bad() == 40 })
}

func insertKeyOpts[TTx any](t *testing.T, c *keel.Client[TTx], key string, n int, opts *keel.InsertOpts) {
	t.Helper()
	batch := make([]keel.InsertParams, n)
	for i := range batch {
		batch[i] = keel.InsertParams{Args: keyArgs{}, Opts: opts}
	}
	if _, err := c.InsertMany(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
}

// TestAutoPause: the Nth consecutive real failure pauses the key before the
// next claim, with an audit row; a wait between failures does not reset the
// count; a success does.
func TestAutoPause(t *testing.T) {
	both(t, testAutoPause[pgx.Tx], testAutoPause[*sql.Tx])
}

func testAutoPause[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	var order []string
	var mu sync.Mutex
	ws := keel.NewWorkers()
	keel.AddWorker(ws, keel.WorkerFunc[keyArgs](func(ctx context.Context, job *keel.Job[keyArgs]) error {
		mu.Lock()
		order = append(order, job.Args.Mode)
		mu.Unlock()
		switch job.Args.Mode {
		case "fail":
			return errors.New("ACK timeout")
		case "wait":
			return keel.JobWait("external_ack", time.Now().Add(time.Hour))
		}
		return nil
	}))
	cfg := fastConfig(ws)
	cfg.Queues = map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 1}}
	cfg.FlowLimits = []keeltype.FlowLimit{{Pattern: "app:*", AutoPauseFailures: 3}}
	c := startClient(t, d, cfg)
	// fail, wait, fail, ok (reset), fail, fail, wait, fail (3rd → pause), ok (must not run)
	modes := []string{"fail", "wait", "fail", "ok", "fail", "fail", "wait", "fail", "ok"}
	var ids []int64
	for _, m := range modes {
		res, err := c.Insert(ctx, keyArgs{Mode: m}, &keel.InsertOpts{FlowKey: "app:7", MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
	}
	waitFor(t, 30*time.Second, "the key to be auto-paused", func() bool {
		k, err := c.FlowKeyGet(ctx, "app:7")
		return err == nil && k.PausedAt != nil
	})
	last := ids[len(ids)-1]
	if row := jobState(t, c, last); row.State != keeltype.JobStateAvailable {
		t.Fatalf("the job after the threshold was claimed (%s): the pause came too late", row.State)
	}
	mu.Lock()
	ran := len(order)
	mu.Unlock()
	if ran != len(modes)-1 {
		t.Fatalf("%d jobs ran, want %d: %v", ran, len(modes)-1, order)
	}
	k, _ := c.FlowKeyGet(ctx, "app:7")
	if k.ConsecutiveFailures != 3 || k.PauseReason != "auto" || k.PausedBy != "system:autopause" {
		t.Fatalf("pause state: %+v", k)
	}
	audit, err := c.AuditList(ctx, &keel.AuditListParams{Action: "flowkey.autopause"})
	if err != nil || len(audit) != 1 || audit[0].Target != "flowkey:app:7" || !jsonHas(audit[0].Context, "threshold", "last_error", "failure_class", "consecutive_failures", keel.ReasonCodeKey) {
		t.Fatalf("auto-pause must be audited with its context: %v %+v", err, audit)
	}
	if _, err := c.FlowKeyResume(keel.WithActor(ctx, "user:ops"), "app:7", "customer fixed their endpoint"); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, last, keeltype.JobStateCompleted)
}

func jsonHas(raw []byte, keys ...string) bool {
	var m map[string]any
	if jsonUnmarshal(raw, &m) != nil {
		return false
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}

// TestPriorityAgeing: low-priority jobs start while high-priority load
// continues, because waiting raises their priority.
func TestPriorityAgeing(t *testing.T) {
	both(t, testAgeing[pgx.Tx], testAgeing[*sql.Tx])
}

func testAgeing[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	lowStarted := make(chan struct{})
	var once sync.Once
	ws := keel.NewWorkers()
	keel.AddWorker(ws, keel.WorkerFunc[keyArgs](func(ctx context.Context, job *keel.Job[keyArgs]) error {
		if job.Args.Mode == "low" {
			once.Do(func() { close(lowStarted) })
			return nil
		}
		time.Sleep(20 * time.Millisecond) // high-priority work takes a little time
		return nil
	}))
	cfg := fastConfig(ws)
	cfg.Queues = map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 2}}
	cfg.PriorityAgeing = 150 * time.Millisecond
	c := startClient(t, d, cfg)
	high := func(n int) {
		batch := make([]keel.InsertParams, n)
		for i := range batch {
			batch[i] = keel.InsertParams{Args: keyArgs{Mode: "high"}, Opts: &keel.InsertOpts{Priority: 1}}
		}
		if _, err := c.InsertMany(ctx, batch); err != nil {
			t.Error(err)
		}
	}
	high(60)
	if _, err := c.Insert(ctx, keyArgs{Mode: "low"}, &keel.InsertOpts{Priority: 4}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	go func() { // keep the high-priority backlog topped up
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				// 600/s offered against 100/s of capacity, so the backlog
				// never runs dry even when a loaded machine stretches the
				// ticks and the inserts (at 200/s it did, under the suite).
				high(30)
			}
		}
	}()
	defer close(stop)
	select {
	case <-lowStarted:
	case <-time.After(20 * time.Second):
		t.Fatal("the low-priority job starved")
	}
	stats, _ := c.QueueStats(ctx)
	for _, s := range stats {
		if s.Queue == keel.DefaultQueue && s.Counts[keeltype.JobStateAvailable] == 0 {
			t.Fatal("high-priority backlog ran out: the test proved nothing")
		}
	}
}
