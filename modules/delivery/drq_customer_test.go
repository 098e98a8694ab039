package delivery

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
)

// These tests take the customer's side: real gocmpp customers on
// PostgreSQL, every DELIVER counted per record (the report's inner Msg_Id)
// and timestamped where the customer received it.

// deliverLog counts what a customer received, per record.
type deliverLog struct {
	mu  sync.Mutex
	all []*delivered
}

func (l *deliverLog) add(d *delivered) {
	l.mu.Lock()
	l.all = append(l.all, d)
	l.mu.Unlock()
}

// count is how many DELIVERs arrived.
func (l *deliverLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

// perRecord is how many DELIVERs carried each record's Msg_Id.
func (l *deliverLog) perRecord() map[uint64]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[uint64]int{}
	for _, d := range l.all {
		out[d.Inner]++
	}
	return out
}

// after lists the DELIVERs received after t.
func (l *deliverLog) after(t time.Time) []*delivered {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*delivered
	for _, d := range l.all {
		if d.At.After(t) {
			out = append(out, d)
		}
	}
	return out
}

func (l *deliverLog) n() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

func msgIDOf(r *Record) uint64 {
	id, _ := strconv.ParseUint(r.MsgID, 10, 64)
	return id
}

// taskKey reads the engine's state of an application's key in a task.
func taskKey[TTx any](t *testing.T, i *inst[TTx], task int64, a *Application) *keeltype.FlowKeyRow {
	t.Helper()
	k, err := i.c.FlowKeyGet(context.Background(), keel.BatchKeyPrefix(task)+a.FlowKey())
	if err != nil {
		return nil
	}
	return k
}

func keyPaused[TTx any](t *testing.T, i *inst[TTx], task int64, a *Application) bool {
	k := taskKey(t, i, task, a)
	return k != nil && k.PausedAt != nil
}

// noLiveExcept waits until the task's items are only in the given live
// buckets (final ones aside).
func settledExcept[TTx any](t *testing.T, i *inst[TTx], task int64, within time.Duration, allowed ...keeltype.BatchOutcome) map[keeltype.BatchOutcome]int64 {
	t.Helper()
	var c map[keeltype.BatchOutcome]int64
	waitFor(t, within, fmt.Sprintf("task %d's items to settle", task), func() bool {
		c = counts(t, i, task)
		for o, v := range c {
			if !o.Live() || v == 0 {
				continue
			}
			ok := false
			for _, a := range allowed {
				ok = ok || a == o
			}
			if !ok {
				return false
			}
		}
		return true
	})
	return c
}

// TestDRQ006WrittenNeverQueued (DRQ-006, DRQ-010): a silent customer
// makes its application auto-pause on ACK timeouts. Every item whose
// DELIVER the customer received stays accounted as written — waiting for
// its ACK, then failed — and is never shown queued again; the items shown
// queued are exactly those the customer never received. Terminating the
// task leaves nothing queued or unfinished inside it; resuming (another
// task, whose customer answers again) sends only the unwritten items, once
// each, and does not turn the written ones into new failures.
func TestDRQ006WrittenNeverQueued(t *testing.T) {
	t.Parallel()
	eachDB(t, testDRQ006WrittenNeverQueued[pgx.Tx], testDRQ006WrittenNeverQueued[*sql.Tx])
}

func testDRQ006WrittenNeverQueued[TTx any](t *testing.T, e *env[TTx]) {
	i := e.start(testSettings("ack_timeout", "2s", "window", "8"))
	ent := e.enterprise(i, "Acme")
	const n, threshold = 30, 5
	type side struct {
		app  *Application
		log  *deliverLog
		recs []*Record
		mu   sync.Mutex
		ack  bool
	}
	mk := func(name, acct string) *side {
		s := &side{app: e.app(i, ent, name, acct, ProtoCMPP30, ""), log: &deliverLog{}}
		customer(t, i, s.app, func(d *delivered) ackAction {
			s.log.add(d)
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.ack {
				return ackAction{}
			}
			return ackAction{Silent: true}
		}, nil)
		for k := range n {
			s.recs = append(s.recs, e.seed(i, s.app, StatusUnconfirmed, time.Now().Add(-time.Hour), fmt.Sprintf("13%s%04d", acct, k)))
		}
		return s
	}
	term, res := mk("terminate-me", "t0601"), mk("resume-me", "t0602")
	tTerm := createTask(t, i, Filter{AppID: term.app.ID}, CreateTaskRequest{Rate: 50, AutoPause: threshold})
	tRes := createTask(t, i, Filter{AppID: res.app.ID}, CreateTaskRequest{Rate: 50, AutoPause: threshold})
	defer func() {
		if t.Failed() {
			dumpTask(t, i, tTerm.ID)
			dumpTask(t, i, tRes.ID)
		}
	}()

	// checkWritten: an item whose record reached the customer is never
	// queued (nor unprocessed); one shown queued never reached it.
	checkWritten := func(task int64, s *side, final bool) (written int) {
		t.Helper()
		sent := s.log.perRecord()
		list, err := i.m.TaskItems(context.Background(), "zh", task, ItemQuery{Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		byID := map[int64]*Record{}
		for _, r := range s.recs {
			byID[r.ID] = r
		}
		for _, it := range list.Items {
			got := sent[msgIDOf(byID[it.DeliveryID])]
			if got > 1 {
				t.Fatalf("record %d reached the customer %d times", it.DeliveryID, got)
			}
			if got == 1 {
				written++
				switch it.Outcome {
				case keeltype.OutcomeWaitingACK, keeltype.OutcomeFailed, keeltype.OutcomeSuccess:
				case keeltype.OutcomeProcessing:
					if final {
						t.Fatalf("record %d was written and is still processing in a finished task", it.DeliveryID)
					}
				default:
					t.Fatalf("record %d reached the customer but its item is %s (%s, attempts %d)",
						it.DeliveryID, it.Outcome, it.Reason, it.Attempts)
				}
				if it.Outcome == keeltype.OutcomeFailed && it.Reason != ClassAckTimeout {
					t.Fatalf("written record %d failed as %q, want %q", it.DeliveryID, it.Reason, ClassAckTimeout)
				}
				if r := e.record(i, it.DeliveryID); r.Status != StatusUnconfirmed && r.Status != StatusAwaitingACK && r.Status != StatusDelivered {
					t.Fatalf("written record %d is %s", it.DeliveryID, r.Status)
				}
			} else if it.Outcome == keeltype.OutcomeFailed || it.Outcome == keeltype.OutcomeWaitingACK || it.Outcome == keeltype.OutcomeSuccess {
				t.Fatalf("record %d never reached the customer but its item is %s (%s: %s)", it.DeliveryID, it.Outcome, it.Reason, it.Error)
			}
		}
		return written
	}

	for _, c := range []struct {
		task int64
		s    *side
	}{{tTerm.ID, term}, {tRes.ID, res}} {
		waitFor(t, 30*time.Second, "the silent application to auto-pause", func() bool { return keyPaused(t, i, c.task, c.s.app) })
		// Every written item settles on its own while the application is
		// paused: nothing waits for a claim the pause refuses.
		got := settledExcept(t, i, c.task, 20*time.Second, keeltype.OutcomeQueued)
		if got[keeltype.OutcomeQueued] == 0 || got[keeltype.OutcomeFailed] < threshold {
			t.Fatalf("after the auto-pause: %v", got)
		}
		if w := checkWritten(c.task, c.s, false); int64(w) != got[keeltype.OutcomeFailed] {
			t.Fatalf("%d records reached the customer, %d items failed (%v)", w, got[keeltype.OutcomeFailed], got)
		}
	}

	// Terminate: nothing is left queued or unfinished in the ended task.
	if _, err := i.m.TerminateTask(alice(), tTerm.ID, "customer is down, stop"); err != nil {
		t.Fatal(err)
	}
	final := settledExcept(t, i, tTerm.ID, 20*time.Second)
	if b, _ := i.c.BatchGet(context.Background(), tTerm.ID); b.State != keeltype.BatchTerminated {
		t.Fatalf("terminated task is %s", b.State)
	}
	w := checkWritten(tTerm.ID, term, true)
	if final[keeltype.OutcomeFailed] != int64(w) || final[keeltype.OutcomeUnprocessed] != int64(n-w) {
		t.Fatalf("terminated: %d written, counts %v", w, final)
	}

	// Resume with the customer answering again: the unwritten items are
	// sent once each and succeed; the written ones stay failed, unsent.
	before := res.log.perRecord()
	res.mu.Lock()
	res.ack = true
	res.mu.Unlock()
	if _, err := i.m.ResumeTask(alice(), tRes.ID, "customer is back up"); err != nil {
		t.Fatal(err)
	}
	done := waitTask(t, i, tRes.ID, 30*time.Second, keeltype.BatchCompleted, keeltype.BatchPartialCompleted)
	if keyPaused(t, i, tRes.ID, res.app) {
		t.Fatal("resuming paused the application again")
	}
	wRes := 0
	for _, v := range before {
		wRes += v
	}
	after := res.log.perRecord()
	for _, r := range res.recs {
		if after[msgIDOf(r)] != 1 {
			t.Fatalf("record %d reached the customer %d times", r.ID, after[msgIDOf(r)])
		}
	}
	if done.State != keeltype.BatchPartialCompleted || done.Counts[keeltype.OutcomeFailed] != int64(wRes) ||
		done.Counts[keeltype.OutcomeSuccess] != int64(n-wRes) {
		t.Fatalf("resumed task: %s %v (written before the resume: %d)", done.State, done.Counts, wRes)
	}
	for _, id := range []int64{tTerm.ID, tRes.ID} {
		if drift, err := i.c.BatchReconcile(context.Background(), id, false); err != nil || !drift.None() {
			t.Fatalf("task %d counters drifted: %v %+v", id, err, drift)
		}
	}
}

// TestDRQ007NoDeliverAfterThreshold (DRQ-007): once an
// application's consecutive failures reach the threshold, no further
// DELIVER reaches that customer — neither for immediate failures (ACK
// rejected) nor for ACK timeouts with items waiting for a window slot —
// and consecutive_failures reads exactly the threshold, not more.
func TestDRQ007NoDeliverAfterThreshold(t *testing.T) {
	t.Parallel()
	eachDB(t, testDRQ007NoDeliverAfterThreshold[pgx.Tx], testDRQ007NoDeliverAfterThreshold[*sql.Tx])
}

func testDRQ007NoDeliverAfterThreshold[TTx any](t *testing.T, e *env[TTx]) {
	i := e.start(testSettings("ack_timeout", "1500ms", "window", "4"))
	ent := e.enterprise(i, "Acme")
	const n, threshold = 40, 6
	type side struct {
		app  *Application
		log  *deliverLog
		recs []*Record
	}
	mk := func(name, acct string, act ackAction) *side {
		s := &side{app: e.app(i, ent, name, acct, ProtoCMPP30, ""), log: &deliverLog{}}
		customer(t, i, s.app, func(d *delivered) ackAction { s.log.add(d); return act }, nil)
		for k := range n {
			s.recs = append(s.recs, e.seed(i, s.app, StatusFailed, time.Now().Add(-time.Hour), fmt.Sprintf("13%s%04d", acct, k)))
		}
		return s
	}
	sides := []*side{mk("rejects", "n0701", ackAction{Result: 9}), mk("silent", "n0702", ackAction{Silent: true})}
	var tasks []int64
	for _, s := range sides {
		tasks = append(tasks, createTask(t, i, Filter{AppID: s.app.ID}, CreateTaskRequest{Rate: 40, AutoPause: threshold}).ID)
	}
	for k, s := range sides {
		waitFor(t, 30*time.Second, s.app.Name+" to auto-pause", func() bool { return keyPaused(t, i, tasks[k], s.app) })
		settled := settledExcept(t, i, tasks[k], 20*time.Second, keeltype.OutcomeQueued)
		// Every failed item's DELIVER is at the customer: the rejects
		// answered theirs, the silent ones timed out after theirs was
		// written. A DELIVER written after the pause would be a failed
		// item too, so once these are in, nothing is still on its way.
		waitFor(t, 10*time.Second, s.app.Name+": the failed items' DELIVERs at the customer", func() bool {
			return int64(s.log.count()) >= settled[keeltype.OutcomeFailed]
		})
		key := taskKey(t, i, tasks[k], s.app)
		if late := s.log.after(*key.PausedAt); len(late) > 0 {
			t.Errorf("%s: %d DELIVERs reached the customer after the auto-pause at %s (first at %s)",
				s.app.Name, len(late), key.PausedAt.Format("15:04:05.000"), late[0].At.Format("15:04:05.000"))
		}
		if key.ConsecutiveFailures != threshold {
			t.Errorf("%s: consecutive_failures %d, threshold %d", s.app.Name, key.ConsecutiveFailures, threshold)
		}
		sent := s.log.perRecord()
		c := counts(t, i, tasks[k])
		var written int
		for _, r := range s.recs {
			written += sent[msgIDOf(r)]
			if sent[msgIDOf(r)] > 1 {
				t.Errorf("%s: record %d reached the customer %d times", s.app.Name, r.ID, sent[msgIDOf(r)])
			}
		}
		if int64(written) != c[keeltype.OutcomeFailed] || c[keeltype.OutcomeQueued] != int64(n-written) {
			t.Errorf("%s: %d DELIVERs at the customer, counts %v", s.app.Name, written, c)
		}
		t.Logf("%s: %d DELIVERs before the pause, %d failed, %d held back", s.app.Name, written, c[keeltype.OutcomeFailed], c[keeltype.OutcomeQueued])
		// The audit entry's failure_class is the engine's class; the task
		// names the delivery class apart, and says the task is held.
		l, err := i.c.AuditList(context.Background(), &keel.AuditListParams{Action: "batch.autopause", Target: fmt.Sprintf("batch:%d", tasks[k])})
		if err != nil || len(l) != 1 {
			t.Fatalf("%s: auto-pause audits %v %d", s.app.Name, err, len(l))
		}
		var ac map[string]any
		_ = json.Unmarshal(l[0].Context, &ac)
		v, err := i.m.Task(context.Background(), "zh", tasks[k])
		if err != nil || len(v.PausedApps) != 1 || !v.Held || v.HeldLabel == "" {
			t.Fatalf("%s: task view %v %+v", s.app.Name, err, v)
		}
		want := map[string]string{"rejects": ClassAckRejected, "silent": ClassAckTimeout}[s.app.Name]
		if p := v.PausedApps[0]; p.Class != want || p.EngineClass != string(keeltype.ErrorClassPermanent) || ac["failure_class"] != p.EngineClass {
			t.Fatalf("%s: paused application %+v, audit failure_class %v", s.app.Name, p, ac["failure_class"])
		}
	}
}

// TestPreviewTokenOnce: a preview token creates at most one task.
// Posting it again returns the first task (200, not 201); two posts at
// once make one task; the customer receives each record once.
func TestPreviewTokenOnce(t *testing.T) {
	t.Parallel()
	eachDB(t, testPreviewTokenOnce[pgx.Tx], testPreviewTokenOnce[*sql.Tx])
}

func testPreviewTokenOnce[TTx any](t *testing.T, e *env[TTx]) {
	i := e.start(testSettings())
	ent := e.enterprise(i, "Acme")
	app := e.app(i, ent, "once", "o0901", ProtoCMPP30, "")
	log := &deliverLog{}
	customer(t, i, app, func(d *delivered) ackAction { log.add(d); return ackAction{} }, nil)
	var recs []*Record
	for k := range 6 {
		recs = append(recs, e.seed(i, app, StatusFailed, time.Now().Add(-time.Hour), fmt.Sprintf("1390901%04d", k)))
	}
	preview := func() string {
		pv, err := i.m.PreviewTask(alice(), Filter{AppID: app.ID})
		if err != nil {
			t.Fatal(err)
		}
		return pv.Token
	}
	post := func(token string) (int, int64, error) {
		body, _ := json.Marshal(CreateTaskRequest{Token: token, Reason: "replay after the outage", Rate: 50})
		status, out, err := callRoute(t, i.m.apiCreate, "POST", PathTasks, string(body))
		if err != nil {
			return 0, 0, err
		}
		return status, out.(TaskView).ID, nil
	}
	// One after the other.
	tok := preview()
	s1, id1, err := post(tok)
	if err != nil || s1 != http.StatusCreated {
		t.Fatalf("first post: %d %v", s1, err)
	}
	s2, id2, err := post(tok)
	if err != nil || s2 != http.StatusOK || id2 != id1 {
		t.Fatalf("second post of the same token: %d task %d (first %d) %v", s2, id2, id1, err)
	}
	waitTask(t, i, id1, 20*time.Second, keeltype.BatchCompleted)
	// Two at once, with a fresh token.
	tok = preview()
	var wg sync.WaitGroup
	type res struct {
		status int
		id     int64
		err    error
	}
	out := make([]res, 2)
	start := make(chan struct{})
	for k := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s, id, err := post(tok)
			out[k] = res{s, id, err}
		}()
	}
	close(start)
	wg.Wait()
	if out[0].err != nil || out[1].err != nil || out[0].id != out[1].id || out[0].status+out[1].status != http.StatusCreated+http.StatusOK {
		t.Fatalf("concurrent posts: %+v", out)
	}
	waitTask(t, i, out[0].id, 20*time.Second, keeltype.BatchCompleted)
	list, err := i.c.BatchList(context.Background(), &keel.BatchListParams{Kind: BatchKind, Limit: 10})
	if err != nil || len(list) != 2 {
		t.Fatalf("%d tasks for two tokens posted four times: %v", len(list), err)
	}
	// Each task re-sent every record once: two DELIVERs per record, not four.
	got := log.perRecord()
	for _, r := range recs {
		if got[msgIDOf(r)] != 2 {
			t.Fatalf("record %d reached the customer %d times over two tasks", r.ID, got[msgIDOf(r)])
		}
	}
}
