package delivery

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module/moduletest"
)

// phonePolicy answers each DELIVER by its phone number; on, when set for
// a number, runs as its DELIVER arrives.
type phonePolicy struct {
	mu sync.Mutex
	m  map[string]ackAction
	on map[string]func()
}

func (p *phonePolicy) set(phone string, a ackAction) {
	p.mu.Lock()
	p.m[phone] = a
	p.mu.Unlock()
}

func (p *phonePolicy) policy(d *delivered) ackAction {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.on[d.Dest]; f != nil {
		f()
	}
	return p.m[d.Dest]
}

// TestDRQ007 (自动暂停): the consecutive-failure threshold counts immediate
// failures (HTTP 503), ACK rejections and ACK timeouts per application;
// writing and waiting for an ACK does not reset the count, only a valid
// success ACK does. Reaching it pauses that application before its next
// claim, audited with the trigger; the other applications carry on. With
// pause_whole_task the task itself pauses, naming the application.
func TestDRQ007(t *testing.T) {
	t.Parallel()
	eachDB(t, testDRQ007[pgx.Tx], testDRQ007[*sql.Tx])
}

func testDRQ007[TTx any](t *testing.T, e *env[TTx]) {
	hc := newHTTPCustomer(t, "secret-h7", func([]PushItem) (int, any) { return 503, map[string]string{"error": "down"} })
	i := e.start(testSettings("ack_timeout", "3s", "ack_inline", "300ms")) // the held ACKs below stay within it
	ent := e.enterprise(i, "Acme")
	pol := &phonePolicy{m: map[string]ackAction{}, on: map[string]func(){}}
	mk := func(name, acct string, p Protocol, url string, n int, act func(k int) ackAction) (*Application, []*Record) {
		a := e.app(i, ent, name, acct, p, url)
		if p != ProtoHTTP {
			customer(t, i, a, pol.policy, nil)
		}
		var recs []*Record
		for k := range n {
			phone := fmt.Sprintf("13%s%05d", acct, k)
			if act != nil {
				pol.set(phone, act(k))
			}
			recs = append(recs, e.seed(i, a, StatusFailed, time.Now().Add(-time.Hour), phone))
		}
		return a, recs
	}
	rejectAll := func(int) ackAction { return ackAction{Result: 9} }
	f, _ := mk("rejects", "f001", ProtoCMPP30, "", 6, rejectAll)
	s, _ := mk("silent", "s001", ProtoCMPP30, "", 8, func(int) ackAction { return ackAction{Silent: true} })
	h, _ := mk("http503", "h007", ProtoHTTP, hc.srv.URL, 5, nil)
	g, _ := mk("fine", "g001", ProtoCMPP20, "", 5, nil)
	// q: reject, reject, a slow success (written, awaited), reject: the
	// wait must not reset the count, so the third rejection pauses. The
	// slow ACK is held until the third rejection is counted (a fixed delay
	// lost the race when the machine was loaded: the next item was sent
	// after the slow ACK had come). The rejections after it wait for the
	// slow item to reach the customer: items of one application may be
	// sent out of order, and three rejections counted before the slow item
	// is written would pause q with it unsent.
	slow, slowSent := make(chan struct{}), make(chan struct{})
	q, qRecs := mk("slow-ok", "q001", ProtoCMPP30, "", 5, func(k int) ackAction {
		return []ackAction{{Result: 9}, {Result: 9}, {Until: slow}, {Result: 9, Until: slowSent}, {Result: 9, Until: slowSent}}[k]
	})
	var slowOnce sync.Once
	pol.mu.Lock()
	pol.on[qRecs[2].Phone] = func() { slowOnce.Do(func() { close(slowSent) }) }
	pol.mu.Unlock()
	// r: reject, reject, success, reject, reject: a success resets. Each
	// answer waits for the one before it to be counted, so the order the
	// engine sees is this one even when sends overtake each other.
	rOK, rAfter := make(chan struct{}), make(chan struct{})
	r, _ := mk("resets", "r001", ProtoCMPP30, "", 5, func(k int) ackAction {
		return []ackAction{{Result: 9}, {Result: 9}, {Until: rOK}, {Result: 9, Until: rAfter}, {Result: 9, Until: rAfter}}[k]
	})
	task := createTask(t, i, Filter{EnterpriseID: ent}, CreateTaskRequest{Rate: 5, AutoPause: 3})
	pausedKey := func(a *Application) bool {
		k, err := i.c.FlowKeyGet(context.Background(), keel.BatchKeyPrefix(task.ID)+a.FlowKey())
		return err == nil && k.PausedAt != nil
	}
	release := func(gate chan struct{}, a *Application, cond func(*keeltype.FlowKeyRow) bool) {
		go func() {
			defer close(gate)
			moduletest.WaitUntil(30*time.Second, func() bool {
				k, err := i.c.FlowKeyGet(context.Background(), keel.BatchKeyPrefix(task.ID)+a.FlowKey())
				return err == nil && cond(k)
			})
		}()
	}
	release(slow, q, func(k *keeltype.FlowKeyRow) bool { return k.ConsecutiveFailures >= 3 || k.PausedAt != nil })
	release(rOK, r, func(k *keeltype.FlowKeyRow) bool { return k.ConsecutiveFailures >= 2 })
	release(rAfter, r, func(k *keeltype.FlowKeyRow) bool { return k.LastSuccessAt != nil })
	defer func() {
		if t.Failed() {
			for _, a := range []*Application{f, s, h, g, q, r} {
				k, _ := i.c.FlowKeyGet(context.Background(), keel.BatchKeyPrefix(task.ID)+a.FlowKey())
				if k != nil {
					t.Logf("%s: paused=%v failures=%d last=%q", a.Name, k.PausedAt != nil, k.ConsecutiveFailures, k.LastError)
				}
			}
			dumpTask(t, i, task.ID)
		}
	}()
	waitFor(t, 30*time.Second, "the failing applications to pause and the others to finish", func() bool {
		return pausedKey(f) && pausedKey(s) && pausedKey(h) && pausedKey(q) &&
			itemsDone(t, i, task.ID, r) && itemsDone(t, i, task.ID, g)
	})
	// q's slow item was written before the third rejection paused q: its
	// ACK, released once the pause is seen, delivers the record and
	// settles the item, paused or not. It travels after the pause (the
	// gate's poll, the customer, the applier's batch), so it is waited for.
	waitFor(t, 30*time.Second, "the slow ACK of q to deliver its record", func() bool {
		return e.record(i, qRecs[2].ID).Status == StatusDelivered
	})
	if pausedKey(g) || pausedKey(r) {
		t.Fatal("an application below the threshold paused")
	}
	b, _ := i.c.BatchGet(context.Background(), task.ID)
	if b.State != keeltype.BatchRunning {
		t.Fatalf("one application's pause stopped the task: %s", b.State)
	}
	view, err := i.m.Task(context.Background(), "zh", task.ID)
	if err != nil {
		t.Fatal(err)
	}
	classes := map[int64]string{}
	for _, p := range view.PausedApps {
		classes[p.AppID] = p.Class
		if p.Failures < 3 || p.ClassLabel == "" || p.AppName == "" {
			t.Fatalf("paused application shown as %+v", p)
		}
	}
	if classes[f.ID] != ClassAckRejected || classes[s.ID] != ClassAckTimeout || classes[h.ID] != ClassHTTPStatus || classes[q.ID] != ClassAckRejected {
		t.Fatalf("auto-pause classes: %v", classes)
	}
	audits, err := i.c.AuditList(context.Background(), &keel.AuditListParams{Action: "batch.autopause"})
	if err != nil || len(audits) != 4 {
		t.Fatalf("auto-pause audits: %v %d", err, len(audits))
	}
	for _, a := range audits {
		var ctx map[string]any
		_ = json.Unmarshal(a.Context, &ctx)
		if a.Actor != "system:autopause" || a.Target != fmt.Sprintf("batch:%d", task.ID) || ctx["threshold"] != float64(3) ||
			ctx["consecutive_failures"] == nil || !strings.HasPrefix(fmt.Sprint(ctx["key"]), "app:") {
			t.Fatalf("auto-pause audit %+v %s", a, a.Context)
		}
	}
	// The task-wide variant names the application that paused it.
	w, _ := mk("whole", "w001", ProtoCMPP30, "", 4, rejectAll)
	whole := createTask(t, i, Filter{AppID: w.ID}, CreateTaskRequest{Rate: 5, AutoPause: 2, PauseWholeTask: true})
	paused := waitTask(t, i, whole.ID, 20*time.Second, keeltype.BatchPaused)
	var pc map[string]any
	if err := json.Unmarshal(paused.PauseContext, &pc); err != nil || paused.PauseReason != "auto" || pc["key"] != w.FlowKey() {
		t.Fatalf("whole-task pause: %q %s %v", paused.PauseReason, paused.PauseContext, err)
	}
	if v, _ := i.m.Task(context.Background(), "zh", whole.ID); v.PauseLabel != "自动暂停（达到安全阈值）" {
		t.Fatalf("pause shown as %q", v.PauseLabel)
	}
}

// itemsDone reports whether every item of app in the task is final.
func itemsDone[TTx any](t *testing.T, i *inst[TTx], task int64, app *Application) bool {
	t.Helper()
	for _, it := range allItems(t, i, task) {
		if it.FlowKey == keel.BatchKeyPrefix(task)+app.FlowKey() && outcomeOf(it).Live() {
			return false
		}
	}
	return true
}

// TestDRQ010 (人工控制): pause, resume and terminate race with execution
// (other instances' items, slow ACKs in flight): while paused nothing new
// is written; resuming continues without repeating a success; terminate
// leaves written items to finish on their ACK and ends every unstarted one
// unprocessed; the counters always sum to the total.
func TestDRQ010(t *testing.T) {
	t.Parallel()
	eachDB(t, testDRQ010[pgx.Tx], testDRQ010[*sql.Tx])
}

func testDRQ010[TTx any](t *testing.T, e *env[TTx]) {
	i := e.start(testSettings("ack_timeout", "5s", "ack_inline", "200ms"))
	ent := e.enterprise(i, "Acme")
	app := e.app(i, ent, "slow", "c010", ProtoCMPP30, "")
	cust := customer(t, i, app, func(*delivered) ackAction { return ackAction{Delay: 700 * time.Millisecond} }, nil)
	const n = 60
	for k := range n {
		e.seed(i, app, StatusUnconfirmed, time.Now().Add(-time.Hour), fmt.Sprintf("1330000%04d", k))
	}
	task := createTask(t, i, Filter{AppID: app.ID}, CreateTaskRequest{Rate: 20})
	bob := keel.WithActor(context.Background(), "user:bob")

	// Churn pause/resume while items run.
	var wg sync.WaitGroup
	var controls atomic.Int32
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			default:
			}
			var err error
			if r.IntN(2) == 0 {
				_, err = i.m.PauseTask(bob, task.ID, "checking the customer")
			} else {
				_, err = i.m.ResumeTask(bob, task.ID, "carry on please")
			}
			if err != nil && !errors.Is(err, keeltype.ErrInvalidState) {
				t.Errorf("control: %v", err)
			} else if err == nil {
				controls.Add(1)
			}
			assertSum(t, i, task.ID, n)
			time.Sleep(time.Duration(20+r.IntN(60)) * time.Millisecond)
		}
	}()
	// The churn goes on until it has both moved the task many times and let
	// items through to the customer.
	waitFor(t, 20*time.Second, "pauses and resumes while items are written", func() bool {
		return controls.Load() >= 10 && len(cust.Received()) >= 5
	})
	close(stop)
	wg.Wait()

	if _, err := i.m.PauseTask(bob, task.ID, "hold everything"); err != nil && !errors.Is(err, keeltype.ErrInvalidState) {
		t.Fatal(err)
	}
	waitTask(t, i, task.ID, 5*time.Second, keeltype.BatchPaused)
	// Paused: once no item runs, nothing new is written, while the slow
	// ACKs of what was written before the pause come back (700 ms each:
	// the window in which a paused item could wrongly be claimed).
	waitFor(t, 20*time.Second, "the items running at the pause to end", func() bool {
		return counts(t, i, task.ID)[keeltype.OutcomeProcessing] == 0
	})
	before := len(cust.Received())
	waitFor(t, 20*time.Second, "the ACKs in flight at the pause to arrive", func() bool {
		return counts(t, i, task.ID)[keeltype.OutcomeWaitingACK] == 0
	})
	if got := len(cust.Received()); got != before {
		t.Fatalf("%d DELIVERs written while the task was paused", got-before)
	}
	if _, err := i.m.ResumeTask(bob, task.ID, "customer is fine"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "more items to be written and in flight", func() bool {
		c := counts(t, i, task.ID)
		return len(cust.Received()) >= before+10 && c[keeltype.OutcomeWaitingACK]+c[keeltype.OutcomeProcessing] > 0 && c[keeltype.OutcomeQueued] > 0
	})
	term, err := i.m.TerminateTask(bob, task.ID, "customer asked to stop")
	if err != nil {
		t.Fatal(err)
	}
	atTerm := len(cust.Received())
	defer func() {
		if t.Failed() {
			dumpTask(t, i, task.ID)
		}
	}()
	waitFor(t, 20*time.Second, "every item to end", func() bool {
		for o, v := range counts(t, i, task.ID) {
			if o.Live() && v > 0 {
				return false
			}
		}
		return true
	})
	final := assertSum(t, i, task.ID, n)
	if term.State != keeltype.BatchTerminated || final.State != keeltype.BatchTerminated {
		t.Fatalf("terminated task: %s then %s", term.State, final.State)
	}
	if got := len(cust.Received()); got > atTerm+1 {
		t.Fatalf("%d DELIVERs written after terminate", got-atTerm)
	}
	sent := map[uint64]int{}
	for _, d := range cust.Received() {
		sent[d.Inner]++
	}
	var success, unprocessed int64
	list, err := i.m.TaskItems(context.Background(), "zh", task.ID, ItemQuery{Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range list.Items {
		msg, _ := parseU64(it.MsgID)
		switch it.Outcome {
		case keeltype.OutcomeSuccess:
			success++
			if sent[msg] != 1 {
				t.Fatalf("success %d written %d times", it.DeliveryID, sent[msg])
			}
		case keeltype.OutcomeUnprocessed:
			unprocessed++
			if sent[msg] != 0 {
				t.Fatalf("unprocessed %d was written", it.DeliveryID)
			}
			if it.OutcomeLabel != "未处理" {
				t.Fatalf("unprocessed shown as %q", it.OutcomeLabel)
			}
		default:
			t.Fatalf("item %d ended %s", it.DeliveryID, it.Outcome)
		}
	}
	if success == 0 || unprocessed == 0 || success+unprocessed != n || final.Counts[keeltype.OutcomeUnprocessed] != unprocessed {
		t.Fatalf("success %d unprocessed %d counters %v", success, unprocessed, final.Counts)
	}
	if drift, err := i.c.BatchReconcile(context.Background(), task.ID, false); err != nil || !drift.None() {
		t.Fatalf("counters drifted: %v %+v", err, drift)
	}
}

func parseU64(s string) (uint64, error) {
	var v uint64
	_, err := fmt.Sscan(s, &v)
	return v, err
}

// assertSum checks the counters sum to the total (including unprocessed).
func assertSum[TTx any](t *testing.T, i *inst[TTx], id, want int64) *keeltype.BatchRow {
	t.Helper()
	b, err := i.c.BatchGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, v := range b.Counts {
		sum += v
	}
	if sum != want || b.Total != want {
		t.Errorf("counters %v sum to %d, total %d, want %d", b.Counts, sum, b.Total, want)
	}
	return b
}

// TestDRQ011 (完整可查): every task and every item is reachable through
// the API's paging — not the most recent 10 or 50 — with the state
// filter on tasks and the outcome, message id and reason filters on items.
func TestDRQ011(t *testing.T) {
	t.Parallel()
	eachDB(t, testDRQ011[pgx.Tx], testDRQ011[*sql.Tx])
}

func testDRQ011[TTx any](t *testing.T, e *env[TTx]) {
	hc := newHTTPCustomer(t, "secret-h11", func(items []PushItem) (int, any) {
		zero, nine := int64(0), int64(9)
		acks := make([]PushItemAck, len(items))
		for k, it := range items {
			code := &zero
			if id, _ := parseU64(it.ID); id%3 == 0 {
				code = &nine
			}
			acks[k] = PushItemAck{ID: it.ID, Code: code}
		}
		return 200, PushAck{Code: &zero, Acks: acks}
	})
	io := e.insertOnly()
	ent := e.enterprise(io, "Acme")
	a := e.app(io, ent, "many", "h11", ProtoHTTP, hc.srv.URL)
	var recs []*Record
	for k := range 120 {
		recs = append(recs, e.seed(io, a, StatusFailed, time.Now().Add(-time.Hour), fmt.Sprintf("1320000%04d", k)))
	}
	big := createTask(t, io, Filter{AppID: a.ID}, CreateTaskRequest{Rate: 500, AutoPause: 1000})
	var small []int64
	for k := range 24 {
		b := createTask(t, io, Filter{AppID: a.ID, Keyword: recs[k].Phone}, CreateTaskRequest{Rate: 1})
		small = append(small, b.ID)
	}
	for _, id := range small[:3] {
		if _, err := io.m.PauseTask(alice(), id, "listing check"); err != nil {
			t.Fatal(err)
		}
	}
	// Every task through pages of 10.
	seen := map[int64]bool{}
	before := 0
	for pages := 0; ; pages++ {
		page := PathTasks + "?limit=10"
		if before != 0 {
			page += fmt.Sprintf("&before=%d", before)
		}
		_, body, err := callRoute(t, io.m.apiTasks, "GET", page, "")
		if err != nil {
			t.Fatal(err)
		}
		l := body.(*TaskList)
		for _, v := range l.Items {
			if seen[v.ID] {
				t.Fatalf("task %d listed twice", v.ID)
			}
			seen[v.ID] = true
			if v.StateLabel == "" || v.StateLabel == string(v.State) {
				t.Fatalf("task state not in words: %+v", v)
			}
		}
		if l.Next == 0 {
			if pages != 2 {
				t.Fatalf("25 tasks in %d pages of 10", pages+1)
			}
			break
		}
		before = int(l.Next)
	}
	if len(seen) != 25 {
		t.Fatalf("%d of 25 tasks reachable", len(seen))
	}
	_, body, err := callRoute(t, io.m.apiTasks, "GET", PathTasks+"?state=paused", "")
	if err != nil || len(body.(*TaskList).Items) != 3 {
		t.Fatalf("state filter: %v %+v", err, body)
	}

	// Execute the big task alone, then page its items.
	for _, id := range small {
		if _, err := io.m.TerminateTask(alice(), id, "listing check done"); err != nil {
			t.Fatal(err)
		}
	}
	w := e.start(testSettings("cmpp_addr", "off"))
	waitTask(t, w, big.ID, 30*time.Second, keeltype.BatchPartialCompleted)
	items := map[int64]bool{}
	after := ""
	for pages := 0; ; pages++ {
		_, body, err := callRoute(t, w.m.apiItems, "GET", fmt.Sprintf("%s/%d/items?limit=50&after=%s", PathTasks, big.ID, after), "")
		if err != nil {
			t.Fatal(err)
		}
		l := body.(*ItemList)
		for _, it := range l.Items {
			items[it.DeliveryID] = true
		}
		if l.Next == "" {
			if pages != 2 {
				t.Fatalf("120 items in %d pages of 50", pages+1)
			}
			break
		}
		after = l.Next
	}
	if len(items) != 120 {
		t.Fatalf("%d of 120 items reachable", len(items))
	}
	for q, want := range map[string]int{
		"outcome=failed":      40,
		"outcome=success":     80,
		"reason=ack_rejected": 40,
		"reason=" + urlq("客户 ACK 拒绝（非零结果）"): 40,
		"msg_id=" + recs[5].MsgID:           1,
		"outcome=skipped":                   0,
	} {
		_, body, err := callRoute(t, w.m.apiItems, "GET", fmt.Sprintf("%s/%d/items?limit=200&%s", PathTasks, big.ID, q), "")
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if got := len(body.(*ItemList).Items); got != want {
			t.Fatalf("%s: %d items, want %d", q, got, want)
		}
	}
}

// TestDRQ012 (操作审计): creation, pause, resume, terminate and auto-pause
// are each audited, in the action's transaction, with the operator (or
// the trigger) and the full context: filter, snapshot and counts for
// creation; the reason and counts for control; the application, class,
// failures and threshold for auto-pause; and single/page requeues too.
func TestDRQ012(t *testing.T) {
	t.Parallel()
	eachDB(t, testDRQ012[pgx.Tx], testDRQ012[*sql.Tx])
}

func testDRQ012[TTx any](t *testing.T, e *env[TTx]) {
	hc := newHTTPCustomer(t, "secret-h12", func([]PushItem) (int, any) { return 500, "no" })
	i := e.start(testSettings("cmpp_addr", "off"))
	ent := e.enterprise(i, "Acme")
	a := e.app(i, ent, "audit", "h12", ProtoHTTP, hc.srv.URL)
	offline := e.app(i, ent, "queued", "c012", ProtoCMPP30, "")
	for k := range 4 {
		e.seed(i, a, StatusFailed, time.Now().Add(-time.Hour), fmt.Sprintf("1310000%04d", k))
		e.seed(i, offline, StatusFailed, time.Now().Add(-time.Hour), fmt.Sprintf("1310001%04d", k))
	}
	ctx := context.Background()
	ctl := createTask(t, i, Filter{AppID: offline.ID}, CreateTaskRequest{Rate: 1})
	bob := keel.WithActor(ctx, "user:bob")
	if _, err := i.m.PauseTask(bob, ctl.ID, "customer maintenance window"); err != nil {
		t.Fatal(err)
	}
	if _, err := i.m.ResumeTask(bob, ctl.ID, "maintenance finished"); err != nil {
		t.Fatal(err)
	}
	if _, err := i.m.TerminateTask(bob, ctl.ID, "replaced by another task"); err != nil {
		t.Fatal(err)
	}
	auto := createTask(t, i, Filter{AppID: a.ID}, CreateTaskRequest{Rate: 50, AutoPause: 2})
	waitFor(t, 20*time.Second, "the auto-pause", func() bool {
		l, _ := i.c.AuditList(ctx, &keel.AuditListParams{Action: "batch.autopause"})
		return len(l) == 1
	})
	rec := e.seed(i, a, StatusFailed, time.Now(), "13100009999")
	if res, err := i.m.Requeue(bob, []int64{rec.ID}, nil, "customer asked again", "single"); err != nil || !res[0].Requeued {
		t.Fatalf("single requeue: %v %+v", err, res)
	}
	check := func(action string, task int64, actor string, keys ...string) {
		t.Helper()
		l, err := i.c.AuditList(ctx, &keel.AuditListParams{Action: action, Target: fmt.Sprintf("batch:%d", task)})
		if err != nil || len(l) != 1 {
			t.Fatalf("%s audits of task %d: %v %d", action, task, err, len(l))
		}
		var c map[string]any
		_ = json.Unmarshal(l[0].Context, &c)
		if l[0].Actor != actor {
			t.Fatalf("%s by %q, want %q", action, l[0].Actor, actor)
		}
		for _, k := range keys {
			if _, ok := c[k]; !ok {
				t.Fatalf("%s context lacks %q: %s", action, k, l[0].Context)
			}
		}
		if action != "batch.autopause" && strings.TrimSpace(l[0].Reason) == "" {
			t.Fatalf("%s without its reason", action)
		}
	}
	check("batch.create", ctl.ID, "user:alice", "filter", "filter_hash", "snapshot_at")
	check("batch.pause", ctl.ID, "user:bob")
	check("batch.resume", ctl.ID, "user:bob")
	check("batch.terminate", ctl.ID, "user:bob")
	check("batch.autopause", auto.ID, "system:autopause", "key", "failure_class", "consecutive_failures", "threshold", "last_error")
	l, err := i.c.AuditList(ctx, &keel.AuditListParams{Action: "delivery.requeue", Target: fmt.Sprintf("delivery:%d", rec.ID)})
	if err != nil || len(l) != 1 || l[0].Actor != "user:bob" || l[0].Reason != "customer asked again" {
		t.Fatalf("requeue audit: %v %+v", err, l)
	}
	var rc map[string]any
	if err := json.Unmarshal(l[0].Context, &rc); err != nil || rc["from_status"] != "failed" || rc["mode"] != "single" {
		t.Fatalf("requeue audit context: %v %s", err, l[0].Context)
	}
}
