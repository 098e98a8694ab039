//go:build linux

package delivery

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gocmpp "github.com/bigwhite/gocmpp"
	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeltype"
)

// child is a Keel instance in its own process.
type child struct {
	cmd  *exec.Cmd
	addr string
	log  string
	done chan struct{}
}

// startChild re-executes the test binary as a Keel instance on the
// environment's database (its PostgreSQL schema or its SQLite file) and
// waits for it to serve. On SQLite the test keeps its own connections to
// the file (an insert-only client that reads the task), so a child shares
// it with the test process; the tests start the next child only after the
// previous one is gone.
func startChild[TTx any](t *testing.T, e *env[TTx], name string, settings ...string) *child {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=instance", "DELIVERY_HELPER_INSTANCE="+name,
		"DELIVERY_HELPER_SETTINGS="+strings.Join(settings, ","))
	if e.path != "" {
		cmd.Env = append(cmd.Env, "DELIVERY_HELPER_SQLITE="+e.path)
	} else {
		cmd.Env = append(cmd.Env, "DELIVERY_HELPER_URL="+testdb.PoolURL(t), "DELIVERY_HELPER_SCHEMA="+e.schema)
	}
	cmd.Stderr = logFile
	// The child never outlives the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, log: logPath, done: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
				ready <- addr
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(c.done)
	}()
	t.Cleanup(func() { c.kill(t) })
	select {
	case c.addr = <-ready:
	case <-c.done:
		t.Fatalf("instance %s exited before serving:\n%s", name, tailFile(logPath))
	case <-time.After(60 * time.Second):
		t.Fatalf("instance %s did not start:\n%s", name, tailFile(logPath))
	}
	return c
}

// kill SIGKILLs the process and waits for it to be gone.
func (c *child) kill(t *testing.T) {
	select {
	case <-c.done:
		return
	default:
	}
	_ = syscall.Kill(c.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Errorf("pid %d survived SIGKILL", c.cmd.Process.Pid)
	}
}

func tailFile(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// TestDRQ009 (重启恢复): a Keel instance in a child process is SIGKILLed
// with items processing (blocked on a full window) and waiting for ACKs
// of DELIVERs already written; a second instance is SIGKILLed with items
// waiting for the customer's connection; a third finishes the task. The
// task continues after each kill: processing items return through their
// lease and are sent once; the written ones, whose connection died with
// the process, end unconfirmed at their deadline (never re-sent); the
// waiting ones resume when the customer connects; no record that
// succeeded reaches the customer twice.
func TestDRQ009(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three Keel processes; skipped under -short")
	}
	t.Parallel()
	eachDB(t, testDRQ009[pgx.Tx], testDRQ009[*sql.Tx])
}

func testDRQ009[TTx any](t *testing.T, e *env[TTx]) {
	io := e.insertOnly()
	ent := e.enterprise(io, "Acme")
	app := e.app(io, ent, "restart", "r009", ProtoCMPP30, "")
	const n = 16
	var recs []*Record
	for k := range n {
		recs = append(recs, e.seed(io, app, StatusFailed, time.Now().Add(-time.Hour), fmt.Sprintf("1350000%04d", k)))
	}
	silent := map[string]bool{recs[0].Phone: true, recs[1].Phone: true}
	task := createTask(t, io, Filter{AppID: app.ID}, CreateTaskRequest{Rate: 20})

	var mu sync.Mutex
	var got []*delivered
	acked := map[uint64]time.Time{}
	policy := func(d *delivered) ackAction {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, d)
		if silent[d.Dest] {
			return ackAction{Silent: true}
		}
		if _, again := acked[d.Inner]; again {
			t.Errorf("record with Msg_Id %d pushed again after its success ACK", d.Inner)
		}
		acked[d.Inner] = time.Now()
		return ackAction{}
	}
	dial := func(c *child) *customerSim {
		cs, err := dialCustomer(c.addr, app.Account, app.Secret, gocmpp.V30, policy, nil)
		if err != nil {
			t.Fatalf("customer: %v", err)
		}
		return cs
	}

	// Phase 1: two silent DELIVERs fill the window of 2; the next items
	// block in processing waiting for room. The kill must find exactly
	// those two written and unconfirmed: a DELIVER the customer has
	// acknowledged but whose ACK the process has not recorded yet is
	// unconfirmed too (it would end conn_lost like the silent ones), and
	// with it the window is not full yet. So wait until the customer holds
	// both silent DELIVERs and every ACK it sent is recorded as a success:
	// from then on nothing moves until the silent ones' ACK timeout.
	c1 := startChild(t, e, "child-1")
	dial(c1)
	waitFor(t, 30*time.Second, "the window full of the two silent DELIVERs, items processing behind them", func() bool {
		mu.Lock()
		silentGot, acks := 0, len(acked)
		for _, d := range got {
			if silent[d.Dest] {
				silentGot++
			}
		}
		mu.Unlock()
		c := counts(t, io, task.ID)
		return silentGot == 2 && c[keeltype.OutcomeSuccess] == int64(acks) &&
			c[keeltype.OutcomeWaitingACK] == 2 && c[keeltype.OutcomeProcessing] >= 2
	})
	at1 := counts(t, io, task.ID)
	c1.kill(t)
	t.Logf("kill 1: %v", at1)

	// Phase 2: nobody connected; the items wait for the connection.
	c2 := startChild(t, e, "child-2")
	waitFor(t, 30*time.Second, "items waiting for the connection", func() bool {
		c := counts(t, io, task.ID)
		return c[keeltype.OutcomeWaitingConnection] >= 3 && c[keeltype.OutcomeProcessing] == 0
	})
	at2 := counts(t, io, task.ID)
	c2.kill(t)
	t.Logf("kill 2: %v", at2)

	// Phase 3: the customer connects to a fresh instance.
	c3 := startChild(t, e, "child-3")
	cust := dial(c3)
	defer cust.Close()
	done := waitTask(t, io, task.ID, 60*time.Second, keeltype.BatchCompleted, keeltype.BatchPartialCompleted)
	if done.Counts[keeltype.OutcomeSuccess] != n-2 || done.Counts[keeltype.OutcomeFailed] != 2 {
		t.Fatalf("after the restarts: %s %v", done.State, done.Counts)
	}
	if drift, err := io.c.BatchReconcile(context.Background(), task.ID, false); err != nil || !drift.None() {
		t.Fatalf("counters drifted: %v %+v", err, drift)
	}
	sent := map[uint64]int{}
	mu.Lock()
	for _, d := range got {
		sent[d.Inner]++
	}
	mu.Unlock()
	list, err := io.m.TaskItems(context.Background(), "zh", task.ID, ItemQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range list.Items {
		id, _ := strconv.ParseUint(it.MsgID, 10, 64)
		switch {
		case silent[it.Phone]:
			// Written before the kill: the process that would have read
			// its ACK is gone, so the outcome is unknown (conn_lost), not
			// an ACK timeout, and it is never re-sent.
			if it.Outcome != keeltype.OutcomeFailed || it.Reason != ClassConnLost || sent[id] != 1 {
				t.Fatalf("DELIVER written before the kill: %+v, sent %d times", it, sent[id])
			}
		case it.Outcome != keeltype.OutcomeSuccess || sent[id] != 1:
			t.Fatalf("record %d: %s, sent %d times", it.DeliveryID, it.Outcome, sent[id])
		}
	}
}

// TestDRQ009AckedInFlightAtKill (DRQ-009: an item left processing by a
// dead instance comes back through its lease, never stays stuck): an instance is SIGKILLed while its customer has DELIVERs in
// hand that it acknowledges — to the dead process. Losing the process that
// carried the write is not the customer's failure: after a restart those
// items end with an unknown outcome (conn_lost, not an ACK timeout), the
// application is not auto-paused (its threshold, 2, is below the number
// of such items), nothing written is written again, and the task finishes
// by itself.
func TestDRQ009AckedInFlightAtKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two Keel processes; skipped under -short")
	}
	t.Parallel()
	eachDB(t, testDRQ009AckedInFlightAtKill[pgx.Tx], testDRQ009AckedInFlightAtKill[*sql.Tx])
}

func testDRQ009AckedInFlightAtKill[TTx any](t *testing.T, e *env[TTx]) {
	io := e.insertOnly()
	ent := e.enterprise(io, "Acme")
	app := e.app(io, ent, "acks-to-the-dead", "k009", ProtoCMPP30, "")
	const n = 20
	var recs []*Record
	for k := range n {
		recs = append(recs, e.seed(io, app, StatusFailed, time.Now().Add(-time.Hour), fmt.Sprintf("1350900%04d", k)))
	}
	task := createTask(t, io, Filter{AppID: app.ID}, CreateTaskRequest{Rate: 20, AutoPause: 2})
	log := &deliverLog{}
	var mu sync.Mutex
	delay := 3 * time.Second
	policy := func(d *delivered) ackAction {
		log.add(d)
		mu.Lock()
		defer mu.Unlock()
		return ackAction{Delay: delay}
	}
	dial := func(c *child) *customerSim {
		// The instance may not have read the application yet.
		var cs *customerSim
		waitFor(t, 10*time.Second, "the customer to log in", func() bool {
			var err error
			cs, err = dialCustomer(c.addr, app.Account, app.Secret, gocmpp.V30, policy, nil)
			return err == nil
		})
		return cs
	}
	settings := []string{"window=8", "ack_timeout=5s"}
	c1 := startChild(t, e, "child-1", settings...)
	first := dial(c1)
	waitFor(t, 30*time.Second, "DELIVERs in flight", func() bool {
		return counts(t, io, task.ID)[keeltype.OutcomeWaitingACK] >= 3
	})
	c1.kill(t)
	// What the killed process wrote before it died may still be in the
	// socket: the customer has read all of it once its connection ended
	// (each DELIVER is handled, and logged, on the reading goroutine).
	// Counted before that, a DELIVER read after the count looked like a
	// send after the kill.
	select {
	case <-first.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the customer's connection to the killed instance did not end within 30 s")
	}
	inFlight := log.perRecord()
	t.Logf("killed with %d DELIVERs received and not yet acknowledged to a live process: %v", len(inFlight), counts(t, io, task.ID))
	mu.Lock()
	delay = 0
	mu.Unlock()

	c2 := startChild(t, e, "child-2", settings...)
	cust := dial(c2)
	defer cust.Close()
	done := waitTask(t, io, task.ID, 60*time.Second, keeltype.BatchCompleted, keeltype.BatchPartialCompleted)
	if k, err := io.c.FlowKeyGet(context.Background(), keel.BatchKeyPrefix(task.ID)+app.FlowKey()); err == nil && k.PausedAt != nil {
		t.Fatalf("the application auto-paused: %s", k.PauseContext)
	}
	if l, err := io.c.AuditList(context.Background(), &keel.AuditListParams{Action: "batch.autopause"}); err != nil || len(l) != 0 {
		t.Fatalf("auto-pause audits after the kill: %v %d", err, len(l))
	}
	sent := log.perRecord()
	list, err := io.m.TaskItems(context.Background(), "zh", task.ID, ItemQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var lost int64
	for _, it := range list.Items {
		id, _ := strconv.ParseUint(it.MsgID, 10, 64)
		if sent[id] > 1 {
			t.Fatalf("record %d reached the customer %d times", it.DeliveryID, sent[id])
		}
		switch it.Outcome {
		case keeltype.OutcomeSuccess:
			if sent[id] != 1 {
				t.Fatalf("record %d succeeded, reached the customer %d times", it.DeliveryID, sent[id])
			}
		case keeltype.OutcomeFailed:
			// Claimed by the killed instance: written (received before the
			// kill) or about to be — nobody can tell, and it is not re-sent.
			lost++
			if it.Reason != ClassConnLost || sent[id] != inFlight[id] {
				t.Fatalf("record %d failed as %q, received %d times, %d before the kill", it.DeliveryID, it.Reason, sent[id], inFlight[id])
			}
		default:
			t.Fatalf("record %d ended %s", it.DeliveryID, it.Outcome)
		}
	}
	if lost < 3 || done.Counts[keeltype.OutcomeSuccess] != n-lost {
		t.Fatalf("after the restart: %s %v (%d lost)", done.State, done.Counts, lost)
	}
	if drift, err := io.c.BatchReconcile(context.Background(), task.ID, false); err != nil || !drift.None() {
		t.Fatalf("counters drifted: %v %+v", err, drift)
	}
}
