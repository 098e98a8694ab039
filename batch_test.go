package keel_test

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// TestBatchPreviewFollowsFilter: counts are those of the filter exactly (a
// status filter is never widened); creation re-materializes from the
// token's filter and snapshot, so records created after the snapshot never
// enter; items are pageable with filters.
func TestBatchPreviewFollowsFilter(t *testing.T) {
	both(t, testBatchPreviewFollowsFilter[pgx.Tx], testBatchPreviewFollowsFilter[*sql.Tx])
}

func testBatchPreviewFollowsFilter[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := keel.WithActor(context.Background(), "user:alice")
	tb := newDeliveryTable(t, d)
	src := deliverySource{tb: tb}
	base := time.Now().Add(-time.Hour)
	statuses := []string{"pending", "failed", "delivered", "awaiting_ack", "pending", "rejected"}
	for i := range 30 {
		tb.add(t, fmt.Sprintf("d%03d", i), []string{"a", "b", "c"}[i%3], statuses[i%len(statuses)], base.Add(time.Duration(i)*time.Second))
	}
	c := insertOnly(t, d)

	pv, err := keel.BatchPreviewOf(ctx, c, src, deliveryFilter{Status: "pending"})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Hits != 10 || pv.Eligible != 10 || pv.RuleSkipped != 0 || len(pv.ByState) != 1 || pv.ByState["pending"] != 10 {
		t.Fatalf("status filter widened: %+v", pv)
	}
	all, err := keel.BatchPreviewOf(ctx, c, src, deliveryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if all.Hits != 30 || all.Eligible != 25 || all.RuleSkipped != 5 || all.ByState["awaiting_ack"] != 5 || all.DistinctKeys != 3 {
		t.Fatalf("preview of everything: %+v", all)
	}
	if all.Earliest == nil || !all.Earliest.Equal(base.UTC().Truncate(time.Microsecond)) {
		t.Fatalf("earliest %v, want %v", all.Earliest, base)
	}

	// A record created after the snapshot, matching the filter.
	time.Sleep(2 * time.Millisecond)
	tb.add(t, "d999", "a", "pending", time.Now())

	b, err := keel.BatchCreate(ctx, c, src, pv.Token, keel.BatchOpts{Reason: "replay pending after incident", Rate: 100})
	if err != nil {
		t.Fatal(err)
	}
	if b.State != keeltype.BatchRunning || !b.Materialized || b.Total != 10 || b.Counts[keeltype.OutcomeQueued] != 10 {
		t.Fatalf("created batch: %s materialized=%v total=%d counts=%v", b.State, b.Materialized, b.Total, b.Counts)
	}
	if b.CreatedBy != "user:alice" || !b.SnapshotAt.Equal(pv.SnapshotAt) || !jsonEqual(b.Filter, `{"status":"pending"}`) {
		t.Fatalf("batch snapshot fields: %+v", b)
	}
	items := allItems(t, c, b.ID, keel.BatchItemsParams{})
	if len(items) != 10 {
		t.Fatalf("items: %d", len(items))
	}
	for _, it := range items {
		if it.Subject == "d999" {
			t.Fatal("a record created after the snapshot entered the batch")
		}
		if !strings.HasPrefix(it.FlowKey, keel.BatchKeyPrefix(b.ID)+"app:") {
			t.Fatalf("item flow key %q not scoped to the batch", it.FlowKey)
		}
	}
	if got := allItems(t, c, b.ID, keel.BatchItemsParams{Subject: "d004"}); len(got) != 1 {
		t.Fatalf("subject filter: %d", len(got))
	}
	if got := allItems(t, c, b.ID, keel.BatchItemsParams{Outcome: keeltype.OutcomeSuccess}); len(got) != 0 {
		t.Fatalf("outcome filter: %d", len(got))
	}
	// Re-running materialization adds nothing: (batch, subject) is unique.
	again, err := keel.BatchMaterialize(ctx, c, src, b.ID)
	if err != nil || again.Total != 10 {
		t.Fatalf("re-materialize: %v %+v", err, again)
	}
	assertExact(t, c, b.ID, 10)
	// Any other path that adds, moves or deletes an item is counted too (the
	// triggers, not the batch code, keep the counters).
	extra, err := c.Insert(ctx, requeueArgs{DeliveryID: "x"}, &keel.InsertOpts{BatchID: b.ID, Subject: "extra"})
	if err != nil {
		t.Fatal(err)
	}
	assertExact(t, c, b.ID, 11)
	if _, err := c.JobCancel(ctx, extra.Job.ID, "not wanted"); err != nil {
		t.Fatal(err)
	}
	if cur := assertExact(t, c, b.ID, 11); cur.Counts[keeltype.OutcomeFailed] != 1 {
		t.Fatalf("an item cancelled by an operator counts as failed: %v", cur.Counts)
	}
	if _, err := c.JobDelete(ctx, extra.Job.ID, "not wanted"); err != nil {
		t.Fatal(err)
	}
	assertExact(t, c, b.ID, 10)
	audits, err := c.AuditList(ctx, &keel.AuditListParams{Action: "batch.create"})
	if err != nil || len(audits) != 1 || audits[0].Actor != "user:alice" || audits[0].Target != fmt.Sprintf("batch:%d", b.ID) ||
		!strings.Contains(string(audits[0].Context), `"filter_hash"`) {
		t.Fatalf("create audit: %v %+v", err, audits)
	}
	list, err := c.BatchList(ctx, &keel.BatchListParams{States: []keeltype.BatchState{keeltype.BatchRunning}})
	if err != nil || len(list) != 1 || list[0].ID != b.ID {
		t.Fatalf("list: %v %v", err, list)
	}
}

// TestBatchTokenRefused: tampered, expired, other-operator, other-key and
// other-kind tokens are refused with typed errors, and so is a short reason.
func TestBatchTokenRefused(t *testing.T) {
	both(t, testBatchTokenRefused[pgx.Tx], testBatchTokenRefused[*sql.Tx])
}

type otherSource struct{ deliverySource }

func (otherSource) Kind() string { return "other.kind" }

func testBatchTokenRefused[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	alice := keel.WithActor(context.Background(), "user:alice")
	tb := newDeliveryTable(t, d)
	src := deliverySource{tb: tb}
	tb.add(t, "d1", "a", "pending", time.Now().Add(-time.Minute))
	c := insertOnly(t, d)
	pv, err := keel.BatchPreviewOf(alice, c, src, deliveryFilter{Status: "pending"})
	if err != nil {
		t.Fatal(err)
	}
	opts := keel.BatchOpts{Reason: "replay after incident"}

	body, sig, _ := strings.Cut(pv.Token, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	widened := strings.Replace(string(raw), `{"status":"pending"}`, `{}`, 1)
	tampered := base64.RawURLEncoding.EncodeToString([]byte(widened)) + "." + sig
	for name, tok := range map[string]string{"tampered": tampered, "garbage": "x.y", "empty": ""} {
		if _, err := keel.BatchCreate(alice, c, src, tok, opts); !errors.Is(err, keeltype.ErrBatchToken) {
			t.Fatalf("%s token: want ErrBatchToken, got %v", name, err)
		}
	}
	if _, err := keel.BatchCreate(keel.WithActor(context.Background(), "user:mallory"), c, src, pv.Token, opts); !errors.Is(err, keeltype.ErrBatchTokenOperator) {
		t.Fatalf("other operator: want ErrBatchTokenOperator, got %v", err)
	}
	if _, err := keel.BatchCreate(alice, c, otherSource{src}, pv.Token, opts); !errors.Is(err, keeltype.ErrBatchToken) {
		t.Fatalf("other kind: want ErrBatchToken, got %v", err)
	}
	if _, err := keel.BatchCreate(alice, c, src, pv.Token, keel.BatchOpts{Reason: "oops"}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("short reason: want ErrInvalidArgument, got %v", err)
	}
	otherKey := batchConfig(nil)
	otherKey.Queues, otherKey.DisableMaintenance, otherKey.BatchSigningKey = nil, true, []byte("another key entirely")
	c2 := startClient(t, d, otherKey)
	if _, err := keel.BatchCreate(alice, c2, src, pv.Token, opts); !errors.Is(err, keeltype.ErrBatchToken) {
		t.Fatalf("other signing key: want ErrBatchToken, got %v", err)
	}
	short := batchConfig(nil)
	short.Queues, short.DisableMaintenance, short.BatchPreviewTTL = nil, true, time.Millisecond
	c3 := startClient(t, d, short)
	pv3, err := keel.BatchPreviewOf(alice, c3, src, deliveryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := keel.BatchCreate(alice, c3, src, pv3.Token, opts); !errors.Is(err, keeltype.ErrBatchTokenExpired) {
		t.Fatalf("expired: want ErrBatchTokenExpired, got %v", err)
	}
	if list, err := c.BatchList(alice, &keel.BatchListParams{}); err != nil || len(list) != 0 {
		t.Fatalf("a refused token created something: %v %v", err, list)
	}
	if _, err := keel.BatchCreate(alice, c, src, pv.Token, opts); err != nil {
		t.Fatalf("the genuine token must work: %v", err)
	}
}

// TestBatchKeyAutoPause: one application failing auto-pauses only its key
// of the batch; the other keys complete; the batch shows the paused key,
// audits the auto-pause with its trigger, and resuming the key finishes the
// batch. Rate limits apply per key.
func TestBatchKeyAutoPause(t *testing.T) {
	both(t, testBatchKeyAutoPause[pgx.Tx], testBatchKeyAutoPause[*sql.Tx])
}

func testBatchKeyAutoPause[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := keel.WithActor(context.Background(), "user:bob")
	tb := newDeliveryTable(t, d)
	src := deliverySource{tb: tb}
	for i := range 24 {
		tb.add(t, fmt.Sprintf("d%03d", i), []string{"good1", "good2", "bad"}[i%3], "failed", time.Now().Add(-time.Minute))
	}
	gw := newGateway()
	var broken sync.Map
	broken.Store("bad", true)
	w := &requeueWorker{gw: gw, fail: func(app string) error {
		if _, ok := broken.Load(app); ok {
			return errors.New("gateway refused: connection reset")
		}
		return nil
	}}
	workers := keel.NewWorkers()
	keel.AddWorker[requeueArgs](workers, w)
	c := startClient(t, d, batchConfig(workers))
	b := createBatch(t, c, src, deliveryFilter{}, keel.BatchOpts{Rate: 200, AutoPauseFailures: 3})

	badKey := keel.BatchKeyPrefix(b.ID) + "app:bad"
	waitFor(t, 15*time.Second, "good keys done and bad key paused", func() bool {
		k, err := c.FlowKeyGet(ctx, badKey)
		cur, _ := c.BatchGet(ctx, b.ID)
		return err == nil && k.PausedAt != nil && cur.Counts[keeltype.OutcomeSuccess] == 16
	})
	cur := assertExact(t, c, b.ID, 24)
	if cur.State != keeltype.BatchRunning {
		t.Fatalf("one key's auto-pause must not stop the batch: %s", cur.State)
	}
	keys, err := c.BatchKeys(ctx, b.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var paused []string
	for _, k := range keys {
		if k.PausedAt != nil {
			paused = append(paused, k.Key)
		}
	}
	if len(paused) != 1 || paused[0] != badKey {
		t.Fatalf("paused keys %v", paused)
	}
	audits, err := c.AuditList(ctx, &keel.AuditListParams{Action: "batch.autopause"})
	if err != nil || len(audits) != 1 || audits[0].Actor != "system:autopause" {
		t.Fatalf("auto-pause audit: %v %+v", err, audits)
	}
	var trig map[string]any
	if err := jsonUnmarshal(audits[0].Context, &trig); err != nil || trig["key"] != "app:bad" ||
		trig["failure_class"] != "retryable" || trig["threshold"] != float64(3) || trig[keel.ReasonCodeKey] != keel.ReasonKeyAutoPaused {
		t.Fatalf("auto-pause audit context: %v %s", err, audits[0].Context)
	}
	if cur.LastError == "" {
		t.Fatal("batch shows no last error")
	}

	broken.Delete("bad")
	if _, err := c.BatchKeyResume(ctx, b.ID, "app:bad", "gateway fixed"); err != nil {
		t.Fatal(err)
	}
	done := waitBatch(t, c, b.ID, 15*time.Second, keeltype.BatchCompleted)
	if done.Counts[keeltype.OutcomeSuccess] != 24 || done.CompletedAt == nil {
		t.Fatalf("after resume: %v", done.Counts)
	}
	for id, n := range gw.snapshot() {
		if n != 1 {
			t.Fatalf("delivery %s sent %d times", id, n)
		}
	}
	if a, err := c.AuditList(ctx, &keel.AuditListParams{Action: "batch.key_resume"}); err != nil || len(a) != 1 || a[0].Actor != "user:bob" {
		t.Fatalf("key resume audit: %v %+v", err, a)
	}
	p := keel.ProgressOf(done, time.Now())
	if p.Done != 24 || p.Total != 24 || p.ETA != 0 {
		t.Fatalf("progress %+v", p)
	}
}

// TestBatchControlRaces: pause, resume and terminate race with execution.
// States and counters stay exact (sum = total = items, no drift), nothing is
// sent twice, and terminate never touches an item already sent.
func TestBatchControlRaces(t *testing.T) {
	both(t, testBatchControlRaces[pgx.Tx], testBatchControlRaces[*sql.Tx])
}

func testBatchControlRaces[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := keel.WithActor(context.Background(), "user:carol")
	tb := newDeliveryTable(t, d)
	src := deliverySource{tb: tb}
	const n = 400
	for i := range n {
		tb.add(t, fmt.Sprintf("d%04d", i), fmt.Sprintf("app%d", i%4), "pending", time.Now().Add(-time.Minute))
	}
	gw := newGateway()
	w := &requeueWorker{gw: gw, delay: time.Millisecond}
	workers := keel.NewWorkers()
	keel.AddWorker[requeueArgs](workers, w)
	c := startClient(t, d, batchConfig(workers))
	startClient(t, d, batchConfig(workers)) // a second instance claims too
	b := createBatch(t, c, src, deliveryFilter{}, keel.BatchOpts{Rate: 1000})

	var wg sync.WaitGroup
	stop := make(chan struct{})
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	defer halt()
	var refused, applied int
	var mu sync.Mutex
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if r.IntN(2) == 0 {
					_, err = c.BatchPause(ctx, b.ID, "checking the customer")
				} else {
					_, err = c.BatchResume(ctx, b.ID, "carry on")
				}
				mu.Lock()
				if errors.Is(err, keeltype.ErrInvalidState) {
					refused++
				} else if err != nil {
					t.Errorf("control: %v", err)
				} else {
					applied++
				}
				mu.Unlock()
				// Counters stay exact while everything moves.
				if cur, err := c.BatchGet(ctx, b.ID); err == nil {
					var sum int64
					for _, v := range cur.Counts {
						sum += v
					}
					if sum != n || cur.Total != n {
						t.Errorf("mid-race counters sum %d, total %d", sum, cur.Total)
					}
				}
				time.Sleep(time.Duration(2+r.IntN(10)) * time.Millisecond)
			}
		}()
	}
	// Churn while items run, then let the batch run until a quarter is
	// done, then terminate it in the middle of execution.
	time.Sleep(time.Second)
	halt()
	if _, err := c.BatchResume(ctx, b.ID, "carry on"); err != nil && !errors.Is(err, keeltype.ErrInvalidState) {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "some items to succeed", func() bool {
		cur, _ := c.BatchGet(ctx, b.ID)
		return cur.Counts[keeltype.OutcomeSuccess] >= n/4
	})
	if applied == 0 {
		t.Fatalf("no control action applied (%d refused)", refused)
	}
	term, err := c.BatchTerminate(ctx, b.ID, "customer asked to stop")
	if err != nil {
		t.Fatal(err)
	}
	if term.State != keeltype.BatchTerminated {
		t.Fatalf("terminate: %s", term.State)
	}
	if _, err := c.BatchResume(ctx, b.ID, "too late"); !errors.Is(err, keeltype.ErrInvalidState) {
		t.Fatalf("resume of a terminated batch: %v", err)
	}
	// Items that had begun finish; none stays live.
	waitFor(t, 20*time.Second, "every item to end", func() bool {
		cur, _ := c.BatchGet(ctx, b.ID)
		for o, v := range cur.Counts {
			if o.Live() && v > 0 {
				return false
			}
		}
		return true
	})
	final := assertExact(t, c, b.ID, n)
	if final.State != keeltype.BatchTerminated {
		t.Fatalf("terminated batch moved to %s", final.State)
	}
	sent := gw.snapshot()
	items := allItems(t, c, b.ID, keel.BatchItemsParams{})
	if len(items) != n {
		t.Fatalf("items %d", len(items))
	}
	var success, unprocessed int64
	for _, it := range items {
		switch keel.BatchOutcomeOf(it) {
		case keeltype.OutcomeSuccess:
			success++
			if sent[it.Subject] != 1 {
				t.Fatalf("item %s succeeded with %d sends", it.Subject, sent[it.Subject])
			}
		case keeltype.OutcomeUnprocessed:
			unprocessed++
			if sent[it.Subject] != 0 {
				t.Fatalf("terminate touched item %s that was already sent", it.Subject)
			}
		default:
			t.Fatalf("item %s ended %s (%s)", it.Subject, keel.BatchOutcomeOf(it), it.State)
		}
	}
	if success != final.Counts[keeltype.OutcomeSuccess] || unprocessed != final.Counts[keeltype.OutcomeUnprocessed] || success+unprocessed != n {
		t.Fatalf("success %d unprocessed %d vs counters %v", success, unprocessed, final.Counts)
	}
	if success == 0 || unprocessed == 0 {
		t.Fatalf("race did not exercise both sides: success %d unprocessed %d", success, unprocessed)
	}
	for _, action := range []string{"batch.pause", "batch.resume", "batch.terminate"} {
		a, err := c.AuditList(ctx, &keel.AuditListParams{Action: action, Target: fmt.Sprintf("batch:%d", b.ID)})
		if err != nil || len(a) == 0 || a[0].Actor != "user:carol" {
			t.Fatalf("%s audit: %v %v", action, err, a)
		}
	}
}

// TestBatchRestartPhases: an owner dies with items in processing (sent and
// not sent), waiting for a connection and waiting for the ACK of what it
// sent. After lease expiry / the wait, the items continue on a new client
// and no success is repeated (each delivery is sent exactly once).
func TestBatchRestartPhases(t *testing.T) {
	both(t, testBatchRestartPhases[pgx.Tx], testBatchRestartPhases[*sql.Tx])
}

func testBatchRestartPhases[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := keel.WithActor(context.Background(), "user:dave")
	tb := newDeliveryTable(t, d)
	src := deliverySource{tb: tb}
	for i := range 4 {
		tb.add(t, fmt.Sprintf("d%d", i), "a", "unconfirmed", time.Now().Add(-time.Minute))
	}
	c0 := insertOnly(t, d)
	b := createBatch(t, c0, src, deliveryFilter{}, keel.BatchOpts{Rate: -1})
	ex := d.Executor()
	claimed, err := ex.JobClaim(ctx, &keeldriver.JobClaimParams{Queue: "default", Owner: "dead", Max: 4, LeaseDuration: time.Minute})
	if err != nil || len(claimed) != 4 {
		t.Fatalf("dead owner's claim: %v %d", err, len(claimed))
	}
	gw := newGateway()
	bySubject := map[string]*keeltype.JobRow{}
	for _, j := range claimed {
		bySubject[j.Subject] = j
	}
	// d0: processing, sent before the crash. d1: processing, not sent.
	gw.send("d0")
	// d2: waiting for a connection (nothing sent). d3: sent, waiting for ACK.
	gw.send("d3")
	past := time.Now().Add(-time.Second)
	res, err := ex.JobFinishMany(ctx, []*keeldriver.JobFinishParams{
		{ID: bySubject["d2"].ID, Fence: bySubject["d2"].Fence, State: keeltype.JobStateWaiting, WaitReason: keel.WaitConnection, WaitDeadline: &past, AttemptDelta: -1},
		{ID: bySubject["d3"].ID, Fence: bySubject["d3"].Fence, State: keeltype.JobStateWaiting, WaitReason: keel.WaitACK, WaitDeadline: &past, AttemptDelta: -1},
	})
	if err != nil || !res[0].Applied || !res[1].Applied {
		t.Fatalf("waits: %v %+v", err, res)
	}
	cur := assertExact(t, c0, b.ID, 4)
	if cur.Counts[keeltype.OutcomeProcessing] != 2 || cur.Counts[keeltype.OutcomeWaitingConnection] != 1 || cur.Counts[keeltype.OutcomeWaitingACK] != 1 {
		t.Fatalf("phases: %v", cur.Counts)
	}
	if got := allItems(t, c0, b.ID, keel.BatchItemsParams{Text: "ack"}); len(got) != 1 || got[0].Subject != "d3" {
		t.Fatalf("text filter: %v", got)
	}
	// The owner is dead: its leases expire.
	future := time.Now().Add(2 * time.Minute)
	rescued, err := ex.JobRescue(ctx, &keeldriver.JobRescueParams{Max: 10, Now: &future})
	if err != nil || len(rescued) != 2 {
		t.Fatalf("rescue: %v %d", err, len(rescued))
	}
	assertExact(t, c0, b.ID, 4)

	w := &requeueWorker{gw: gw}
	workers := keel.NewWorkers()
	keel.AddWorker[requeueArgs](workers, w)
	c := startClient(t, d, batchConfig(workers))
	done := waitBatch(t, c, b.ID, 15*time.Second, keeltype.BatchCompleted, keeltype.BatchPartialCompleted)
	if done.State != keeltype.BatchCompleted || done.Counts[keeltype.OutcomeSuccess] != 4 {
		t.Fatalf("after restart: %s %v", done.State, done.Counts)
	}
	for i := range 4 {
		if n := gw.count(fmt.Sprintf("d%d", i)); n != 1 {
			t.Fatalf("d%d sent %d times", i, n)
		}
	}
	assertExact(t, c, b.ID, 4)
}

// TestBatchPausesAsWhole: with PauseOnKeyPause, a key's auto-pause pauses
// the batch with reason auto and the trigger in its context; resuming the
// batch resumes its keys and the batch finishes.
func TestBatchPausesAsWhole(t *testing.T) {
	both(t, testBatchPausesAsWhole[pgx.Tx], testBatchPausesAsWhole[*sql.Tx])
}

func testBatchPausesAsWhole[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := keel.WithActor(context.Background(), "user:erin")
	tb := newDeliveryTable(t, d)
	src := deliverySource{tb: tb}
	for i := range 12 {
		tb.add(t, fmt.Sprintf("d%03d", i), []string{"ok", "bad"}[i%2], "rejected", time.Now().Add(-time.Minute))
	}
	gw := newGateway()
	var broken sync.Map
	broken.Store("bad", true)
	w := &requeueWorker{gw: gw, delay: 2 * time.Millisecond, fail: func(app string) error {
		if _, ok := broken.Load(app); ok {
			return keel.JobFail(errors.New("ACK rejected: code 8"))
		}
		return nil
	}}
	workers := keel.NewWorkers()
	keel.AddWorker[requeueArgs](workers, w)
	cfg := batchConfig(workers)
	cfg.Queues = map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 1}}
	c := startClient(t, d, cfg)
	b := createBatch(t, c, src, deliveryFilter{}, keel.BatchOpts{Rate: 500, AutoPauseFailures: 2, PauseOnKeyPause: true})
	paused := waitBatch(t, c, b.ID, 15*time.Second, keeltype.BatchPaused)
	var pctx map[string]any
	if err := jsonUnmarshal(paused.PauseContext, &pctx); err != nil || paused.PauseReason != "auto" ||
		pctx["key"] != "app:bad" || pctx["failure_class"] != "permanent" {
		t.Fatalf("auto pause: %q %s %v", paused.PauseReason, paused.PauseContext, err)
	}
	assertExact(t, c, b.ID, 12)
	broken.Delete("bad")
	if _, err := c.BatchResume(ctx, b.ID, "customer fixed their endpoint"); err != nil {
		t.Fatal(err)
	}
	done := waitBatch(t, c, b.ID, 15*time.Second, keeltype.BatchPartialCompleted, keeltype.BatchCompleted)
	// At least the two failures that reached the threshold; the ok key's
	// items and the bad key's later ones succeed.
	if done.State != keeltype.BatchPartialCompleted || done.Counts[keeltype.OutcomeFailed] < 2 ||
		done.Counts[keeltype.OutcomeFailed]+done.Counts[keeltype.OutcomeSuccess] != 12 || done.Counts[keeltype.OutcomeSuccess] < 6 {
		t.Fatalf("after resume: %s %v", done.State, done.Counts)
	}
	assertExact(t, c, b.ID, 12)
}
