package export

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
)

const alice = "alice"

// s3Bucket serves a real S3-protocol server (gofakes3, in memory) over
// HTTP on loopback and opens the module's s3blob bucket on it: a
// protocol-level stand-in for an S3-compatible store.
func s3Bucket(t testing.TB) Option {
	t.Helper()
	backend := s3mem.New()
	faker := gofakes3.New(backend)
	srv := httptest.NewServer(faker.Server())
	t.Cleanup(srv.Close)
	if err := backend.CreateBucket("exports"); err != nil {
		t.Fatal(err)
	}
	b, err := OpenS3(context.Background(), S3Config{Endpoint: srv.URL, Bucket: "exports", Region: "us-east-1", AccessKey: "test", SecretKey: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return WithBucket(b)
}

// TestExportSnapshotConsistent: rows inserted, updated and deleted while
// the export runs; the file equals the cut exactly. Run on fileblob and on
// the S3 path, CSV and XLSX(+gzip).
func TestExportSnapshotConsistent(t *testing.T) {
	each(t, func(t *testing.T, e *tenv[pgx.Tx]) {
		for _, store := range []string{"file", "s3"} {
			t.Run(store, func(t *testing.T) { testSnapshot(t, e, store) })
		}
	}, func(t *testing.T, e *tenv[*sql.Tx]) {
		for _, store := range []string{"file", "s3"} {
			t.Run(store, func(t *testing.T) { testSnapshot(t, e, store) })
		}
	})
}

func testSnapshot[TTx any](t *testing.T, e *tenv[TTx], store string) {
	ctx := context.Background()
	var m *Module[TTx]
	var once sync.Once
	changed := make(chan struct{})
	tenant := "snap-" + store
	hooks := Hooks{BeforeChunk: func(_ context.Context, task int64, shard, chunk int) {
		if shard != 0 || chunk != 1 {
			return
		}
		once.Do(func() {
			defer close(changed)
			// During the export: insert, update (rows in shards already
			// read and not yet read) and delete.
			live, err := m.LiveOrders(ctx, tenant, 3000, 0)
			if err != nil {
				t.Error(err)
				return
			}
			for i := 0; i < 20; i++ {
				if err := m.PutOrder(ctx, Order{Tenant: tenant, OrderNo: fmt.Sprintf("NEW-%d", i), Customer: "新客户", AmountMinor: 5, Currency: "CNY", Status: "paid", CreatedAt: time.Now()}); err != nil {
					t.Error(err)
				}
			}
			for _, no := range []string{live[1], live[1500], live[2900]} {
				if err := m.PutOrder(ctx, Order{Tenant: tenant, OrderNo: no, Customer: "UPDATED", AmountMinor: 1, Currency: "CNY", Status: "refunded"}); err != nil {
					t.Error(err)
				}
			}
			for _, no := range []string{live[2], live[1600], live[2950]} {
				if err := m.DeleteOrder(ctx, tenant, no); err != nil {
					t.Error(err)
				}
			}
		})
	}}
	opts := []Option{WithHooks(hooks)}
	if store == "s3" {
		opts = append(opts, s3Bucket(t))
	}
	m = e.build(t, small(nil), opts...)
	e.start(t, m, 5*time.Second, false)
	seed(t, m, tenant, 3000, alice)
	task, err := m.Create(as(alice), Request{Tenant: tenant, BOM: true})
	if err != nil {
		t.Fatal(err)
	}
	if task.ShardCount < 6 {
		t.Fatalf("%d shards: the test wants several", task.ShardCount)
	}
	select {
	case <-changed:
	case <-time.After(3 * time.Minute):
		t.Fatal("the export never reached shard 0's second chunk")
	}
	done := waitState(t, m, task.ID, 4*time.Minute, StateSucceeded)
	if done.Verdict != "ok" || done.ObjectRows != 3000 {
		t.Fatalf("verdict %s rows %d: %s", done.Verdict, done.ObjectRows, done.VerdictDetail)
	}
	header, rows := fileRows(t, m, task.ID, alice)
	if !slices.Equal(header, Columns) {
		t.Fatalf("header %v", header)
	}
	want := expectedCut(t, m, tenant, task.DataVersion)
	if len(rows) != len(want) || len(want) != 3000 {
		t.Fatalf("file has %d rows, the cut %d", len(rows), len(want))
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r[0]] {
			t.Fatalf("row %s twice", r[0])
		}
		seen[r[0]] = true
		if !slices.Equal(r, want[r[0]]) {
			t.Fatalf("row %v, the cut has %v", r, want[r[0]])
		}
		if r[2] == "UPDATED" || strings.HasPrefix(r[1], "NEW-") {
			t.Fatalf("a change after the cut leaked in: %v", r)
		}
	}
	// The changes are real: the next export sees them (XLSX, gzip).
	v, _ := m.DataVersion(ctx)
	if v <= task.DataVersion {
		t.Fatalf("no change after the cut (version %d)", v)
	}
	next, err := m.Create(as(alice), Request{Tenant: tenant, Format: "xlsx", Gzip: true, Columns: []string{"order_no", "customer", "amount_minor"}})
	if err != nil {
		t.Fatal(err)
	}
	nd := waitState(t, m, next.ID, 4*time.Minute, StateSucceeded)
	if nd.Verdict != "ok" || nd.ObjectRows != 3000+20-3 {
		t.Fatalf("second export: verdict %s rows %d (%s)", nd.Verdict, nd.ObjectRows, nd.VerdictDetail)
	}
}

// TestExportShardTakeover: a worker frozen past its lease; another takes
// over with a higher fence; the frozen one's late commit is refused; the
// file is whole.
func TestExportShardTakeover(t *testing.T) {
	each(t, testTakeover[pgx.Tx], testTakeover[*sql.Tx])
}

func testTakeover[TTx any](t *testing.T, e *tenv[TTx]) {
	frozen := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	var frozenFence atomic.Int64
	var mA *Module[TTx]
	mA = e.build(t, small(nil), WithOwner("worker-a"), WithHooks(Hooks{BeforeCommit: func(task int64, shard, chunk int) {
		if shard == 0 && chunk == 1 {
			once.Do(func() {
				sh, _ := mA.Shards(context.Background(), task)
				frozenFence.Store(sh[0].Fence)
				close(frozen)
				<-release // frozen: no heartbeat reaches the engine from here on
			})
		}
	}}))
	set := small(map[string]string{"export.dir": mA.set.dir})
	cA := e.start(t, mA, time.Second, false)
	seed(t, mA, "takeover", 2000, alice)
	task, err := mA.Create(as(alice), Request{Tenant: "takeover"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-frozen:
	case <-time.After(3 * time.Minute):
		t.Fatal("the worker never reached shard 0's second chunk")
	}
	// The process freezes: its client stops heartbeating (it gives up its
	// hand-back while the worker is stuck), so the lease runs out.
	// The stop must finish (heartbeats end) before the lease can run out;
	// on a loaded SQLite it can take a while.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	if err := cA.StopAndCancel(ctx); err != nil {
		t.Logf("stopping the frozen worker's client: %v", err)
	}
	cancel()
	mB := e.build(t, set, WithOwner("worker-b"))
	e.start(t, mB, time.Second, false)
	done := waitState(t, mB, task.ID, 4*time.Minute, StateSucceeded)
	shards, _ := mB.Shards(context.Background(), task.ID)
	if shards[0].Fence <= frozenFence.Load() || shards[0].Owner != "worker-b" {
		t.Fatalf("shard 0: fence %d owner %s; the frozen worker had %d", shards[0].Fence, shards[0].Owner, frozenFence.Load())
	}
	close(release)
	moduletest.WaitFor(t, 2*time.Minute, "the frozen worker's late commit refused", func() bool {
		return mA.Stat("stale_refused") >= 1
	})
	shards, _ = mB.Shards(context.Background(), task.ID)
	if shards[0].StaleRefused < 1 || shards[0].State != "done" {
		t.Fatalf("shard 0 after the late commit: %+v", shards[0])
	}
	after, _ := mB.Task(context.Background(), task.ID)
	if after.State != StateSucceeded || after.ObjectSHA256 != done.ObjectSHA256 || after.RowsDone != 2000 {
		t.Fatalf("the late commit changed the task: %+v", after)
	}
	_, rows := fileRows(t, mB, task.ID, alice)
	want := expectedCut(t, mB, "takeover", task.DataVersion)
	if len(rows) != len(want) {
		t.Fatalf("file %d rows, cut %d", len(rows), len(want))
	}
	for _, r := range rows {
		if !slices.Equal(r, want[r[0]]) {
			t.Fatalf("row %v differs from the cut", r)
		}
	}
}

// TestExportUploadUnknown: upload done and commit failed → commit only;
// upload lost → uploaded again; a different object at the key →
// quarantined, never overwritten.
func TestExportUploadUnknown(t *testing.T) {
	each(t, testUnknown[pgx.Tx], testUnknown[*sql.Tx])
}

func testUnknown[TTx any](t *testing.T, e *tenv[TTx]) {
	ctx := context.Background()
	var commitFailed, uploadFailed, planted atomic.Bool
	var m *Module[TTx]
	garbage := []byte("not,what,the,cut,holds\n")
	m = e.build(t, small(nil), WithHooks(Hooks{
		AfterChunkUpload: func(task int64, shard, chunk int) error {
			if task == 1 && shard == 0 && chunk == 1 && commitFailed.CompareAndSwap(false, true) {
				return errors.New("the commit after the upload failed")
			}
			return nil
		},
		FailUpload: func(task int64, shard, chunk int) error {
			if task == 1 && shard == 1 && chunk == 0 && uploadFailed.CompareAndSwap(false, true) {
				return errors.New("upload timed out")
			}
			return nil
		},
		BeforeChunk: func(_ context.Context, task int64, shard, chunk int) {
			if task == 2 && shard == 1 && chunk == 0 && planted.CompareAndSwap(false, true) {
				tk, _ := m.Task(ctx, task)
				if err := m.Bucket().WriteAll(ctx, partKey(task, tk.DataVersion, 1, 0), garbage, nil); err != nil {
					t.Error(err)
				}
			}
		},
	}))
	e.start(t, m, 5*time.Second, false)
	seed(t, m, "u1", 1500, alice)
	seed(t, m, "u2", 1500, alice)
	t1, err := m.Create(as(alice), Request{Tenant: "u1"})
	if err != nil || t1.ID != 1 {
		t.Fatalf("first task %v %v", t1, err)
	}
	d1 := waitState(t, m, 1, 4*time.Minute, StateSucceeded)
	if !commitFailed.Load() || !uploadFailed.Load() {
		t.Fatal("the failure windows were not reached")
	}
	if m.Stat("settle_match") < 1 || m.Stat("settle_absent") < 1 {
		t.Fatalf("settlements: match %d absent %d", m.Stat("settle_match"), m.Stat("settle_absent"))
	}
	shards, _ := m.Shards(ctx, 1)
	if !strings.Contains(shards[0].Settled, "committed only") || !strings.Contains(shards[1].Settled, "uploaded again") {
		t.Fatalf("shard notes: %q / %q", shards[0].Settled, shards[1].Settled)
	}
	if _, rows := fileRows(t, m, 1, alice); int64(len(rows)) != d1.EstimatedRows || d1.Verdict != "ok" {
		t.Fatalf("file %d rows, want %d (%s)", len(rows), d1.EstimatedRows, d1.Verdict)
	}
	t2, err := m.Create(as(alice), Request{Tenant: "u2"})
	if err != nil || t2.ID != 2 {
		t.Fatalf("second task %v %v", t2, err)
	}
	waitState(t, m, 2, 4*time.Minute, StateQuarantined)
	got, err := m.Bucket().ReadAll(ctx, partKey(2, t2.DataVersion, 1, 0))
	if err != nil || !bytes.Equal(got, garbage) {
		t.Fatalf("the quarantined object was touched: %q %v", got, err)
	}
	var n int64
	if err := m.DB.QueryRow(ctx, "SELECT count(*) FROM export_quarantine WHERE task_id = 2").Scan(&n); err != nil || n != 1 {
		t.Fatalf("quarantine rows %d %v", n, err)
	}
	if m.Stat("settle_mismatch") != 1 {
		t.Fatalf("mismatches %d", m.Stat("settle_mismatch"))
	}
}

// TestExportIdempotentRequest: a repeated request returns the task; an
// explicit new version makes a new one.
func TestExportIdempotentRequest(t *testing.T) {
	each(t, testIdem[pgx.Tx], testIdem[*sql.Tx])
}

func testIdem[TTx any](t *testing.T, e *tenv[TTx]) {
	m := e.build(t, small(nil))
	e.start(t, m, 5*time.Second, false)
	seed(t, m, "idem", 800, alice, "bob")
	req := Request{Tenant: "idem", Columns: []string{"order_no", "status"}, Filters: map[string]string{"status": "paid"}}
	a, err := m.Create(as(alice), req)
	if err != nil {
		t.Fatal(err)
	}
	// The same parameters said differently normalize to the same task.
	b, err := m.Create(as(alice), Request{Tenant: "idem", Columns: []string{"order_no", "status", "order_no"}, Filters: map[string]string{"status": " paid "}, Format: "CSV"})
	if err != nil || b.ID != a.ID || !b.Existing {
		t.Fatalf("repeat: %v %v (first %d)", b, err, a.ID)
	}
	other, err := m.Create(as("bob"), req)
	if err != nil || other.ID == a.ID {
		t.Fatalf("another user shares a task: %v %v", other, err)
	}
	waitState(t, m, a.ID, 4*time.Minute, StateSucceeded)
	c, err := m.Create(as(alice), req)
	if err != nil || c.ID != a.ID {
		t.Fatalf("repeat after success: %v %v", c, err)
	}
	req.NewVersion = true
	d, err := m.Create(as(alice), req)
	if err != nil || d.ID == a.ID || d.Existing {
		t.Fatalf("new version: %v %v", d, err)
	}
	if d.IdemKey == a.IdemKey {
		t.Fatal("the new version has the same key")
	}
	waitState(t, m, d.ID, 4*time.Minute, StateSucceeded)
	ad, _ := m.Task(context.Background(), a.ID)
	dd, _ := m.Task(context.Background(), d.ID)
	if ad.ObjectSHA256 != dd.ObjectSHA256 || ad.ObjectKey == dd.ObjectKey {
		t.Fatalf("same cut, same bytes, two objects: %s %s / %s %s", ad.ObjectSHA256, dd.ObjectSHA256, ad.ObjectKey, dd.ObjectKey)
	}
}

// TestExportBadInput: each refusal has its stable code and creates nothing.
func TestExportBadInput(t *testing.T) {
	each(t, testBad[pgx.Tx], testBad[*sql.Tx])
}

func testBad[TTx any](t *testing.T, e *tenv[TTx]) {
	m := e.build(t, small(map[string]string{"export.max_rows": "100", "export.user_inflight": "1"}))
	m.SetHeapWatermark(1) // nothing is claimed: the first export stays running
	e.start(t, m, 5*time.Second, false)
	seed(t, m, "bad", 150, alice)
	if err := m.Grant(context.Background(), "bad", "carol", PermExport); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		user string
		req  Request
		code string
	}{
		{alice, Request{Tenant: "bad", Columns: []string{"password"}}, CodeUnknownColumn},
		{alice, Request{Tenant: "bad", Filters: map[string]string{"colour": "red"}}, CodeUnknownFilter},
		{alice, Request{Tenant: "bad", Format: "pdf"}, CodeUnsupportedFormat},
		{"mallory", Request{Tenant: "bad"}, CodeForbidden},
		{"carol", Request{Tenant: "bad", Columns: []string{"order_no", "amount_minor"}}, CodeForbidden},
		{alice, Request{Tenant: "bad"}, CodeTooLarge},
	}
	for _, c := range cases {
		_, err := m.Create(as(c.user), c.req)
		var pe *module.Error
		if !errors.As(err, &pe) || pe.Code != c.code {
			t.Fatalf("%+v: %v, want %s", c.req, err, c.code)
		}
	}
	var n int64
	_ = m.DB.QueryRow(context.Background(), "SELECT count(*) FROM export_tasks").Scan(&n)
	if n != 0 {
		t.Fatalf("%d tasks created by refused requests", n)
	}
	if _, err := m.Create(as(alice), Request{Tenant: "bad", Filters: map[string]string{"status": "paid"}}); err != nil {
		t.Fatal(err)
	}
	_, err := m.Create(as(alice), Request{Tenant: "bad", Filters: map[string]string{"status": "shipped"}})
	var pe *module.Error
	if !errors.As(err, &pe) || pe.Code != CodeUserBusy {
		t.Fatalf("second running export: %v", err)
	}
}

// TestExportNoticeFailureKeepsSuccess: the completion notice fails for a
// while; the task is and stays succeeded; the notice arrives later, once.
func TestExportNoticeFailureKeepsSuccess(t *testing.T) {
	each(t, testNotice[pgx.Tx], testNotice[*sql.Tx])
}

func testNotice[TTx any](t *testing.T, e *tenv[TTx]) {
	var failing atomic.Bool
	var failures atomic.Int64
	failing.Store(true)
	m := e.build(t, small(map[string]string{"export.notice_retry": "100ms"}), WithHooks(Hooks{Notice: func(int64) error {
		if failing.Load() {
			failures.Add(1)
			return errors.New("notice channel down")
		}
		return nil
	}}))
	e.start(t, m, 5*time.Second, true)
	seed(t, m, "notice", 600, alice)
	task, err := m.Create(as(alice), Request{Tenant: "notice"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, m, task.ID, 4*time.Minute, StateSucceeded)
	moduletest.WaitFor(t, 2*time.Minute, "notice deliveries failing", func() bool { return failures.Load() >= 2 })
	tk, _ := m.Task(context.Background(), task.ID)
	if tk.State != StateSucceeded || tk.NoticeState != "pending" {
		t.Fatalf("while the notice fails: %s / %s", tk.State, tk.NoticeState)
	}
	if _, rows := fileRows(t, m, task.ID, alice); len(rows) != 600 {
		t.Fatalf("download while the notice fails: %d rows", len(rows))
	}
	failing.Store(false)
	moduletest.WaitFor(t, 3*time.Minute, "the notice delivered", func() bool {
		n, _ := m.Notices(context.Background(), task.ID)
		return n == 1
	})
	tk, _ = m.Task(context.Background(), task.ID)
	if tk.State != StateSucceeded || tk.NoticeState != "delivered" {
		t.Fatalf("after the notice: %s / %s", tk.State, tk.NoticeState)
	}
}

// TestExportOrphanCleaner: unreferenced temporary objects are marked, then
// deleted on a later pass (the second one run as the periodic job runs it,
// through its worker), audited; the published file is never deleted.
func TestExportOrphanCleaner(t *testing.T) {
	each(t, testOrphans[pgx.Tx], testOrphans[*sql.Tx])
}

func testOrphans[TTx any](t *testing.T, e *tenv[TTx]) {
	ctx := context.Background()
	m := e.build(t, small(map[string]string{"export.orphan_age": "0s", "export.orphan_grace": "0s"}))
	// The module schedules the cleaner every orphan_interval, at the top of
	// the UTC hour by default; a run of this test across that moment had a
	// pass of its own mark objects between the ones counted here. The test
	// takes the schedule out and runs every pass itself.
	c := e.startWith(t, m, 5*time.Second, false, func(cfg *keel.Config) {
		kept := cfg.PeriodicJobs[:0]
		for _, p := range cfg.PeriodicJobs {
			if p.Name != "export.orphans" {
				kept = append(kept, p)
			}
		}
		if len(kept) != len(cfg.PeriodicJobs)-1 {
			t.Fatalf("the module did not schedule its orphan cleaner")
		}
		cfg.PeriodicJobs = kept
	})
	seed(t, m, "orph", 700, alice)
	task, err := m.Create(as(alice), Request{Tenant: "orph"})
	if err != nil {
		t.Fatal(err)
	}
	done := waitState(t, m, task.ID, 4*time.Minute, StateSucceeded)
	if err := m.Bucket().WriteAll(ctx, "parts/t999/v1/s00000/c00000.csv", []byte("stray"), nil); err != nil {
		t.Fatal(err)
	}
	chunks, _ := m.chunksOf(ctx, task.ID)
	r1, err := m.CleanOrphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Marked != len(chunks)+1 || r1.Deleted != 0 || r1.Referenced != 1 {
		t.Fatalf("first pass %+v (%d chunks)", r1, len(chunks))
	}
	if ok, _ := m.Bucket().Exists(ctx, chunks[0].key); !ok {
		t.Fatal("a marked object was deleted on the marking pass")
	}
	// The second pass as the schedule runs it: a job on the merge queue.
	clean, err := c.Insert(ctx, CleanArgs{}, &keel.InsertOpts{Queue: QueueMerge})
	if err != nil {
		t.Fatal(err)
	}
	moduletest.WaitFor(t, time.Minute, "the cleaner's job completed", func() bool {
		j, err := c.JobGet(ctx, clean.Job.ID)
		return err == nil && j.State == keeltype.JobStateCompleted
	})
	for _, ch := range chunks {
		if ok, _ := m.Bucket().Exists(ctx, ch.key); ok {
			t.Fatalf("chunk %s still stored after the second pass", ch.key)
		}
	}
	if ok, _ := m.Bucket().Exists(ctx, "parts/t999/v1/s00000/c00000.csv"); ok {
		t.Fatal("the stray object is still stored after the second pass")
	}
	if ok, _ := m.Bucket().Exists(ctx, done.ObjectKey); !ok {
		t.Fatal("the published file was deleted")
	}
	if _, rows := fileRows(t, m, task.ID, alice); len(rows) != 700 {
		t.Fatal("the file no longer downloads")
	}
	audits, err := c.AuditList(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range audits {
		if a.Action == "export.orphan_delete" {
			n++
		}
	}
	if n != len(chunks)+1 {
		t.Fatalf("%d deletions audited, want %d", n, len(chunks)+1)
	}
}

// TestExportFairness: one shard at a time; a small tenant's export that
// arrives after a large one finishes long before the large one does.
func TestExportFairness(t *testing.T) {
	each(t, testFair[pgx.Tx], testFair[*sql.Tx])
}

func testFair[TTx any](t *testing.T, e *tenv[TTx]) {
	m := e.build(t, small(map[string]string{"export.memory_budget_mb": "30", "export.task_peak_mb": "30", "export.shard_rows": "100", "export.chunk_rows": "100"}))
	if m.Concurrency() != 1 {
		t.Fatalf("concurrency %d", m.Concurrency())
	}
	seed(t, m, "big", 1500, alice)
	seed(t, m, "small", 100, alice)
	e.start(t, m, 5*time.Second, false)
	big, err := m.Create(as(alice), Request{Tenant: "big"})
	if err != nil {
		t.Fatal(err)
	}
	moduletest.WaitFor(t, 2*time.Minute, "the big export under way", func() bool {
		tk, _ := m.Task(context.Background(), big.ID)
		return tk.ShardsDone >= 1
	})
	small, err := m.Create(as(alice), Request{Tenant: "small"})
	if err != nil {
		t.Fatal(err)
	}
	// Fairness is in the shard claims: the small tenant's shard is served
	// within a turn or two. Its merge and verification are not shard work,
	// and the big tenant's shards go on meanwhile, for as long as a loaded
	// machine makes them take, so the count is read when its shards are done.
	moduletest.WaitFor(t, 4*time.Minute, "the small export's shards done", func() bool {
		tk, _ := m.Task(context.Background(), small.ID)
		return tk.ShardCount > 0 && tk.ShardsDone == tk.ShardCount
	})
	bt, _ := m.Task(context.Background(), big.ID)
	if bt.ShardsDone > bt.ShardCount/2 {
		t.Fatalf("the small tenant waited for %d of the big one's %d shards", bt.ShardsDone, bt.ShardCount)
	}
	waitState(t, m, small.ID, 4*time.Minute, StateSucceeded)
	waitState(t, m, big.ID, 4*time.Minute, StateSucceeded)
}

// TestExportMemoryBound/watermark: above the heap watermark no shard is
// claimed; below it claiming resumes. (The 2,000,000-row bound is
// TestExportMemoryBound/postgres-2m in memory_test.go.)
func TestExportWatermark(t *testing.T) {
	each(t, testWatermark[pgx.Tx], testWatermark[*sql.Tx])
}

func testWatermark[TTx any](t *testing.T, e *tenv[TTx]) {
	m := e.build(t, small(nil))
	m.SetHeapWatermark(1) // any heap is above it
	e.start(t, m, 5*time.Second, false)
	seed(t, m, "wm", 600, alice)
	task, err := m.Create(as(alice), Request{Tenant: "wm"})
	if err != nil {
		t.Fatal(err)
	}
	moduletest.WaitFor(t, time.Minute, "claims paused", func() bool { p, _ := m.Paused(); return p })
	_, pauses := m.Paused()
	shards, _ := m.Shards(context.Background(), task.ID)
	for _, s := range shards {
		if s.State != "pending" || s.Fence != 0 {
			t.Fatalf("shard %d claimed above the watermark: %+v", s.No, s)
		}
	}
	m.SetHeapWatermark(1 << 40)
	waitState(t, m, task.ID, 4*time.Minute, StateSucceeded)
	if p, _ := m.Paused(); p || pauses < 1 {
		t.Fatalf("paused %v after %d pauses", p, pauses)
	}
}
