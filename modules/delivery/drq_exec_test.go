package delivery

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
)

// maxInWindow is the most receive times inside any window of length w
// (half-open: a window starting at a receive time).
func maxInWindow(ts []time.Time, w time.Duration) int {
	s := append([]time.Time(nil), ts...)
	sort.Slice(s, func(i, j int) bool { return s[i].Before(s[j]) })
	best, j := 0, 0
	for i := range s {
		for j < len(s) && s[j].Sub(s[i]) < w {
			j++
		}
		best = max(best, j-i)
	}
	return best
}

// TestDRQ004 (每应用限速): a task over three applications, executed by two
// Keel instances: one application connected to each instance and one to
// both. At the customers' side (gocmpp receive times), no sliding one-
// second window of any application holds more than the task's rate, and
// the applications are served side by side, not one after another.
//
// The window leaves the sender 50 ms of slack (writes are paced 5% under
// the rate), and the customer's receive times are taken in this process:
// under -race, on a machine running the rest of the suite, one stall of a
// goroutine longer than that (the writer's or the customer's reader's)
// puts one write more in a second than the sender wrote. So, like the
// flow limiter's multi-process tests, it runs in a step of its own without
// -race (scripts/test.sh), both databases.
func TestDRQ004(t *testing.T) {
	if raceEnabled {
		t.Skip("a timing-precision test: run without -race (go test -run '^TestDRQ004$')")
	}
	t.Parallel()
	eachDB(t, testDRQ004[pgx.Tx], testDRQ004[*sql.Tx])
}

func testDRQ004[TTx any](t *testing.T, e *env[TTx]) {
	const rate, perApp = 5, 12
	a := e.start(testSettings("instance", "a"))
	b := e.start(testSettings("instance", "b"))
	ent := e.enterprise(a, "Acme")
	apps := []*Application{
		e.app(a, ent, "one", "r01", ProtoCMPP30, ""),
		e.app(a, ent, "two", "r02", ProtoCMPP20, ""),
		e.app(a, ent, "three", "r03", ProtoCMPP30, ""),
	}
	refresh(t, a, b)
	var mu sync.Mutex
	recv := map[int64][]time.Time{}
	for _, app := range apps {
		rec := func(app *Application) func(*delivered) ackAction {
			return func(d *delivered) ackAction {
				mu.Lock()
				recv[app.ID] = append(recv[app.ID], d.At)
				mu.Unlock()
				return ackAction{}
			}
		}(app)
		switch app.Account {
		case "r01":
			customer(t, a, app, rec, nil)
		case "r02":
			customer(t, b, app, rec, nil)
		default:
			customer(t, a, app, rec, nil)
			customer(t, b, app, rec, nil)
		}
	}
	for _, app := range apps {
		for k := range perApp {
			e.seed(a, app, StatusFailed, time.Now().Add(-time.Hour), fmt.Sprintf("1370%04d%03d", app.ID, k))
		}
	}
	task := createTask(t, a, Filter{EnterpriseID: ent}, CreateTaskRequest{Rate: rate})
	done := waitTask(t, a, task.ID, 60*time.Second, keeltype.BatchCompleted, keeltype.BatchPartialCompleted)
	if done.State != keeltype.BatchCompleted || done.Counts[keeltype.OutcomeSuccess] != 3*perApp {
		t.Fatalf("task: %s %v", done.State, done.Counts)
	}
	mu.Lock()
	defer mu.Unlock()
	var firsts, lasts []time.Time
	for _, app := range apps {
		ts := recv[app.ID]
		if len(ts) != perApp {
			t.Fatalf("application %s received %d pushes, want %d", app.Name, len(ts), perApp)
		}
		if n := maxInWindow(ts, time.Second); n > rate {
			t.Fatalf("application %s received %d pushes within one second; the rate is %d", app.Name, n, rate)
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		firsts, lasts = append(firsts, ts[0]), append(lasts, ts[len(ts)-1])
		t.Logf("application %s: %d pushes in %s (%.2f/s), at most %d in any second",
			app.Name, len(ts), ts[len(ts)-1].Sub(ts[0]).Round(time.Millisecond),
			float64(len(ts)-1)/ts[len(ts)-1].Sub(ts[0]).Seconds(), maxInWindow(ts, time.Second))
	}
	// Side by side: every application started before any finished.
	for _, f := range firsts {
		for _, l := range lasts {
			if !f.Before(l) {
				t.Fatalf("applications ran one after another: starts %v, ends %v", firsts, lasts)
			}
		}
	}
}

// TestDRQ005 (客户离线): items of an application with no connection wait
// for it — counted as waiting for a connection, never failed or skipped,
// and nothing is claimed in their records; when the customer connects they
// continue and succeed, each pushed once.
func TestDRQ005(t *testing.T) {
	t.Parallel()
	eachDB(t, testDRQ005[pgx.Tx], testDRQ005[*sql.Tx])
}

func testDRQ005[TTx any](t *testing.T, e *env[TTx]) {
	i := e.start(testSettings())
	ent := e.enterprise(i, "Acme")
	app := e.app(i, ent, "offline", "o01", ProtoCMPP30, "")
	var recs []*Record
	for k := range 6 {
		recs = append(recs, e.seed(i, app, StatusUnconfirmed, time.Now().Add(-time.Hour), fmt.Sprintf("1360000%04d", k)))
	}
	task := createTask(t, i, Filter{AppID: app.ID}, CreateTaskRequest{Rate: 50})
	waitFor(t, 60*time.Second, "every item to wait for the connection", func() bool {
		return counts(t, i, task.ID)[keeltype.OutcomeWaitingConnection] == 6
	})
	c := counts(t, i, task.ID)
	if c[keeltype.OutcomeFailed] != 0 || c[keeltype.OutcomeSkipped] != 0 {
		t.Fatalf("offline counted as failure or skip: %v", c)
	}
	for _, r := range recs {
		if got := e.record(i, r.ID); got.Status != StatusUnconfirmed || got.Attempts != 0 {
			t.Fatalf("a record of an offline customer was touched: %+v", got)
		}
	}
	items, err := i.m.TaskItems(context.Background(), "zh", task.ID, ItemQuery{Outcome: keeltype.OutcomeWaitingConnection})
	if err != nil || len(items.Items) != 6 || items.Items[0].ReasonLabel != "客户离线，等待可用连接（未写出）" {
		t.Fatalf("waiting items: %v %+v", err, items)
	}
	// A failure threshold of 1 would have paused the application had a
	// wait been a failure.
	cust := customer(t, i, app, nil, nil)
	done := waitTask(t, i, task.ID, 20*time.Second, keeltype.BatchCompleted, keeltype.BatchPartialCompleted)
	if done.State != keeltype.BatchCompleted || done.Counts[keeltype.OutcomeSuccess] != 6 {
		t.Fatalf("after connecting: %s %v", done.State, done.Counts)
	}
	seen := map[uint64]int{}
	for _, d := range cust.Received() {
		seen[d.Inner]++
	}
	for _, r := range recs {
		id, _ := strconv.ParseUint(r.MsgID, 10, 64)
		if seen[id] != 1 {
			t.Fatalf("record %d pushed %d times", r.ID, seen[id])
		}
	}
}

// TestDRQ006 (ACK 闭环): writing only waits — the item is waiting for its
// ACK and its record awaiting_ack until the customer answers; a valid ACK
// succeeds; an ACK timeout, a non-zero result and an ACK naming another
// Msg_Id fail, each with its class.
func TestDRQ006(t *testing.T) {
	t.Parallel()
	eachDB(t, testDRQ006[pgx.Tx], testDRQ006[*sql.Tx])
}

func testDRQ006[TTx any](t *testing.T, e *env[TTx]) {
	// 5 s: the held item is answered only after the test saw it waiting,
	// which on a loaded machine can take longer than a shorter timeout.
	i := e.start(testSettings("ack_timeout", "5s", "ack_inline", "300ms"))
	ent := e.enterprise(i, "Acme")
	app := e.app(i, ent, "acks", "k01", ProtoCMPP30, "")
	release := make(chan struct{})
	var mu sync.Mutex
	pol := map[string]ackAction{
		"13500000002": {Result: 9},
		"13500000003": {Echo: 777},
		"13500000004": {Silent: true},
	}
	var held []*delivered
	cust := customer(t, i, app, func(d *delivered) ackAction {
		mu.Lock()
		defer mu.Unlock()
		if d.Dest == "13500000005" {
			held = append(held, d)
			return ackAction{Silent: true} // answered by hand below
		}
		return pol[d.Dest]
	}, nil)
	ids := map[string]int64{}
	for _, p := range []string{"13500000001", "13500000002", "13500000003", "13500000004", "13500000005"} {
		ids[p] = e.seed(i, app, StatusFailed, time.Now().Add(-time.Hour), p).ID
	}
	task := createTask(t, i, Filter{AppID: app.ID}, CreateTaskRequest{Rate: 100})
	slow := ids["13500000005"]
	waitFor(t, 10*time.Second, "the held item to wait for its ACK", func() bool {
		mu.Lock()
		n := len(held)
		mu.Unlock()
		return n == 1 && itemOutcome(t, i, task.ID, slow) == keeltype.OutcomeWaitingACK
	})
	if r := e.record(i, slow); r.Status != StatusAwaitingACK || r.Seq == nil || r.ConnID == "" || r.AckDeadline == nil {
		t.Fatalf("written, not acknowledged: %+v", r)
	}
	mu.Lock()
	d := held[0]
	mu.Unlock()
	close(release)
	cust.Respond(deliverResp(cust, d.Outer, 0), d.Seq)
	done := waitTask(t, i, task.ID, 20*time.Second, keeltype.BatchCompleted, keeltype.BatchPartialCompleted)
	want := map[string][3]string{
		"13500000001": {"success", "delivered", ""},
		"13500000005": {"success", "delivered", ""},
		"13500000002": {"failed", "rejected", ClassAckRejected},
		"13500000003": {"failed", "rejected", ClassInvalidMsgID},
		"13500000004": {"failed", "unconfirmed", ClassAckTimeout},
	}
	list, err := i.m.TaskItems(context.Background(), "zh", task.ID, ItemQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range list.Items {
		w := want[it.Phone]
		r := e.record(i, it.DeliveryID)
		if string(it.Outcome) != w[0] || string(r.Status) != w[1] || it.Reason != w[2] || r.LastErrorClass != w[2] {
			t.Fatalf("%s: item %+v, record %s/%s; want %v", it.Phone, it, r.Status, r.LastErrorClass, w)
		}
		if w[0] == "failed" && it.Error == "" {
			t.Fatalf("%s: the raw error is not kept: %+v", it.Phone, it)
		}
	}
	if done.State != keeltype.BatchPartialCompleted {
		t.Fatalf("task state %s", done.State)
	}
}

func deliverResp(c *customerSim, msgID uint64, result uint32) gocmppPacker {
	return newDeliverResp(c.Version(), msgID, result)
}

func itemOutcome[TTx any](t *testing.T, i *inst[TTx], task, record int64) keeltype.BatchOutcome {
	t.Helper()
	rows, err := i.c.BatchItems(context.Background(), &keel.BatchItemsParams{BatchID: task, Subject: subjectOf(record)})
	if err != nil || len(rows) != 1 {
		t.Fatalf("item of %d: %v %d", record, err, len(rows))
	}
	return outcomeOf(rows[0])
}

// TestDRQ008 (并发幂等): two Keel instances execute two tasks over the
// same records at once (every application connected to both instances):
// each record reaches the customer exactly once; in one task its item
// succeeded, in the other it was skipped as handled by another task.
func TestDRQ008(t *testing.T) {
	t.Parallel()
	eachDB(t, testDRQ008[pgx.Tx], testDRQ008[*sql.Tx])
}

func testDRQ008[TTx any](t *testing.T, e *env[TTx]) {
	io := e.insertOnly()
	ent := e.enterprise(io, "Acme")
	var apps []*Application
	for k := range 3 {
		apps = append(apps, e.app(io, ent, fmt.Sprintf("app%d", k), fmt.Sprintf("p%02d", k), []Protocol{ProtoCMPP20, ProtoCMPP30, ProtoCMPP30}[k], ""))
	}
	const perApp = 20
	var recs []*Record
	for _, app := range apps {
		for k := range perApp {
			recs = append(recs, e.seed(io, app, StatusRejected, time.Now().Add(-time.Hour), fmt.Sprintf("1340%04d%03d", app.ID, k)))
		}
	}
	// Both tasks freeze every record as rejected: neither may re-send
	// what the other delivered.
	t1 := createTask(t, io, Filter{EnterpriseID: ent}, CreateTaskRequest{Rate: 200})
	t2 := createTask(t, io, Filter{EnterpriseID: ent}, CreateTaskRequest{Rate: 200})
	// Every instance holding a connection claims (one_sender off), so both
	// instances scan both tasks' items of every application at once.
	a := e.start(testSettings("instance", "a", "one_sender", "false"))
	b := e.start(testSettings("instance", "b", "one_sender", "false"))
	var custs []*customerSim
	for _, app := range apps {
		custs = append(custs, customer(t, a, app, nil, nil), customer(t, b, app, nil, nil))
	}
	d1 := waitTask(t, a, t1.ID, 60*time.Second, keeltype.BatchCompleted, keeltype.BatchPartialCompleted)
	d2 := waitTask(t, a, t2.ID, 60*time.Second, keeltype.BatchCompleted, keeltype.BatchPartialCompleted)
	got := map[uint64]int{}
	perConn := make([]int, len(custs))
	for k, c := range custs {
		for _, d := range c.Received() {
			got[d.Inner]++
			perConn[k]++
		}
	}
	for _, r := range recs {
		id, _ := strconv.ParseUint(r.MsgID, 10, 64)
		if got[id] != 1 {
			t.Fatalf("record %d reached the customer %d times", r.ID, got[id])
		}
	}
	t.Logf("DELIVERs per connection (application × instance): %v", perConn)
	total := int64(len(recs))
	if d1.Counts[keeltype.OutcomeSuccess]+d2.Counts[keeltype.OutcomeSuccess] != total ||
		d1.Counts[keeltype.OutcomeSkipped]+d2.Counts[keeltype.OutcomeSkipped] != total {
		t.Fatalf("successes %d+%d and skips %d+%d, want %d each",
			d1.Counts[keeltype.OutcomeSuccess], d2.Counts[keeltype.OutcomeSuccess],
			d1.Counts[keeltype.OutcomeSkipped], d2.Counts[keeltype.OutcomeSkipped], total)
	}
	for _, task := range []int64{t1.ID, t2.ID} {
		list, err := a.m.TaskItems(context.Background(), "zh", task, ItemQuery{Outcome: keeltype.OutcomeSkipped, Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range list.Items {
			if it.Reason != SkipOtherTask {
				t.Fatalf("task %d skipped record %d as %q, want %q", task, it.DeliveryID, it.Reason, SkipOtherTask)
			}
		}
	}
}
