//go:build linux

package inventory

import (
	"bufio"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/module/moduletest"
)

// proc is a Keel process running a helper role (proc_test.go).
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	log   string
	lines chan string // what it printed, line by line
	done  chan struct{}
	exit  error // once done
}

func init() {
	threeProcesses = func(t *testing.T, e any) {
		switch x := e.(type) {
		case *tenv[pgx.Tx]:
			testNoOversellProcesses(t, x)
		case *tenv[*sql.Tx]:
			testNoOversellProcesses(t, x)
		}
	}
}

// spawn starts the test binary as a helper on e's database and waits for
// it to be ready.
func spawn[TTx any](t *testing.T, e *tenv[TTx], name, role string, from, count, skus int) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+role, helperDriver+"="+e.Name, helperDSN+"="+e.DSN,
		fmt.Sprintf("%s=%d,%d", helperLines, from, count), fmt.Sprintf("%s=%d", helperSKUs, skus))
	cmd.Stderr = logFile
	// A helper never outlives the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, stdin: in, log: logPath, lines: make(chan string, 1000), done: make(chan struct{})}
	// One goroutine reads the output to its end and only then waits for
	// the process (os/exec: Wait closes the pipe), so that no line printed
	// before an exit is lost.
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.exit = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	if got := p.next(t, "ready", 3*time.Minute); got != "ready" {
		t.Fatalf("%s: %q before ready", name, got)
	}
	return p
}

// next waits for the process's next line starting with prefix.
func (p *proc) next(t *testing.T, prefix string, within time.Duration) string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				<-p.done
				t.Fatalf("%s exited (%v) waiting for %q:\n%s", p.name, p.exit, prefix, tail(p.log))
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-deadline:
			t.Fatalf("%s: no %q within %s:\n%s", p.name, prefix, within, tail(p.log))
		}
	}
}

// kill SIGKILLs the process and waits for it to be gone.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
	// What it printed and nobody read may fill the lines' buffer, where
	// the reader would wait for ever before reaching the end of output.
	for range p.lines {
	}
	<-p.done
}

// waitLong waits for cond up to five minutes.
func waitLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	moduletest.WaitFor(t, 5*time.Minute, what, cond)
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// testNoOversellProcesses is 数据演绎 6 across three Keel processes:
// available 100, 200 requests of 1 spread over the processes, all sent
// at once: exactly 100 are granted in all.
func testNoOversellProcesses[TTx any](t *testing.T, e *tenv[TTx]) {
	m := e.build(t, nil)
	seed(t, m, "WH1", "C0", 100)
	var ps []*proc
	for k, n := range []int{67, 67, 66} {
		ps = append(ps, spawn(t, e, fmt.Sprintf("oversell-%d", k), "oversell", 1000+k*100, n, 1))
	}
	for _, p := range ps {
		if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	var applied, short int
	for _, p := range ps {
		var a, s, errs int
		l := p.next(t, "done", 3*time.Minute)
		if _, err := fmt.Sscanf(l, "done applied=%d insufficient=%d errors=%d", &a, &s, &errs); err != nil || errs != 0 {
			t.Fatalf("%s: %q (%v):\n%s", p.name, l, err, tail(p.log))
		}
		applied, short = applied+a, short+s
	}
	if applied != 100 || short != 100 {
		t.Fatalf("across three processes: %d applied, %d insufficient; want 100 and 100", applied, short)
	}
	av, rs, v := stock(t, e, "WH1", "C0")
	if av != 0 || rs != 100 || v != 101 {
		t.Fatalf("available %d reserved %d version %d; want 0, 100, 101", av, rs, v)
	}
	if n := e.Count(t, "SELECT count(*) FROM inv_ledger WHERE movement = 'reserve'"); n != 100 {
		t.Fatalf("%d reserve ledger rows; want 100", n)
	}
	if n := e.Count(t, "SELECT count(*) FROM inv_ledger l JOIN keel_events_outbox o ON o.event_id = CAST(l.id AS TEXT) WHERE l.movement = 'reserve'"); n != 100 {
		t.Fatalf("%d reserve ledger rows with their event; want 100", n)
	}
	if n := e.Count(t, "SELECT count(DISTINCT stock_version) FROM inv_ledger WHERE movement = 'reserve'"); n != 100 {
		t.Fatalf("%d distinct stock versions among 100 grants", n)
	}
}

// TestInventoryCrash: Keel processes are SIGKILLed while they reserve,
// confirm and release (three at a time on one database, over the same
// order lines), and then while they consume the ledger's events. Once
// the survivors have finished: every balance equals what the ledger
// derives, every ledger row has its one event, every order line has one
// reservation in an end state, and fulfilment made exactly one pick task
// per confirmed reservation.
func TestInventoryCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Keel processes and kills them; skipped under -short")
	}
	t.Parallel()
	each(t, testCrash[pgx.Tx], testCrash[*sql.Tx])
}

func testCrash[TTx any](t *testing.T, e *tenv[TTx]) {
	const lines, skus, per = 240, 8, 20 // 30 lines per SKU for 20 units: some are short
	m := e.build(t, nil)
	for s := range skus {
		seed(t, m, "WH1", fmt.Sprintf("C%d", s), per)
	}
	ledger := func() int64 { return e.Count(t, "SELECT count(*) FROM inv_ledger") }
	// Every line at its end: the workers have nothing left but replays.
	settled := func() bool {
		return e.Count(t, "SELECT count(*) FROM inv_reservation WHERE order_line LIKE 'P%' AND state IN ('confirmed', 'released', 'failed')") == lines
	}
	// The kill points count from the seeded ledger, read before any worker
	// starts: read after, on a fast machine (no race detector) the workers
	// had already written most of what they ever write, and a point 60 rows
	// further was never reached.
	base := ledger()
	var mu sync.Mutex
	n := 0
	worker := func() *proc {
		mu.Lock()
		n++
		name := fmt.Sprintf("work-%d", n)
		mu.Unlock()
		return spawn(t, e, name, "work", 0, lines, skus)
	}
	// A consuming process first (the bus queues events for consumers it
	// knows), killed mid-way through the reservations below: what it did
	// not consume waits for the next one.
	c0 := spawn(t, e, "consume-0", "consume", 0, 0, skus)
	// During reservations: three processes on the same lines; one is
	// killed each time the ledger has grown by 60 rows, and replaced.
	ws := []*proc{worker(), worker(), worker()}
	if e.Name == "sqlite" {
		// SQLite has one writer for every process: under the race
		// detector on a loaded machine a fourth process starting next to
		// three busy writers could wait minutes for its turn. Two workers
		// still reserve the same lines at once.
		ws[2].kill()
		ws = ws[:2]
	}
	for k := range 3 {
		target := base + int64(60*(k+1))
		eventually(t, fmt.Sprintf("%d ledger rows", target), func() bool { return ledger() >= target || settled() })
		victim := k % len(ws)
		ws[victim].kill()
		t.Logf("killed %s at %d ledger rows (every line at its end: %v)", ws[victim].name, ledger(), settled())
		ws[victim] = worker()
		if k == 0 {
			c0.kill()
			t.Logf("killed consume-0 with %d pick tasks made", e.Count(t, "SELECT count(*) FROM inv_pick_task"))
		}
	}
	// The survivors finish: a pass without an error by a process started
	// after the last kill leaves every line at its end.
	last := ws[len(ws)-1]
	for {
		l := last.next(t, "pass", 5*time.Minute)
		if l == "pass errors=0" {
			break
		}
		t.Logf("%s: %s", last.name, l)
	}
	for _, w := range ws {
		w.kill()
	}
	confirmed := e.Count(t, "SELECT count(*) FROM inv_reservation WHERE state = 'confirmed'")
	if confirmed == 0 {
		t.Fatal("no reservation confirmed")
	}
	// During consumption: a consuming process is killed with a third of
	// the pick tasks made; another finishes.
	picks := func() int64 { return e.Count(t, "SELECT count(*) FROM inv_pick_task") }
	c1 := spawn(t, e, "consume-1", "consume", 0, 0, skus)
	eventually(t, "a third of the pick tasks", func() bool { return picks() >= confirmed/3 })
	c1.kill()
	t.Logf("killed consume-1 with %d of %d pick tasks made", picks(), confirmed)
	spawn(t, e, "consume-2", "consume", 0, 0, skus)
	// The killed process's deliveries come back after their ack wait (30s),
	// partition by partition: longer than eventually's minute on a loaded
	// machine.
	waitLong(t, "every pick task", func() bool { return picks() >= confirmed })
	stockEvents := e.Count(t, "SELECT count(*) FROM keel_events_outbox WHERE topic = 'inventory.stock'")
	waitLong(t, "fulfilment's inbox complete", func() bool {
		return e.Count(t, "SELECT count(*) FROM keel_events_inbox WHERE consumer = 'inventory-fulfilment'") >= stockEvents
	})

	checks := []struct{ what, query string }{
		{"balances that differ from the ledger's derivation", `SELECT count(*) FROM inv_stock s LEFT JOIN (
			SELECT warehouse_id, sku_id, sum(d_on_hand) AS oh, sum(d_available) AS av, sum(d_reserved) AS rs, sum(d_sold) AS so,
			       count(*) AS n, max(stock_version) AS v
			FROM inv_ledger GROUP BY warehouse_id, sku_id) l ON l.warehouse_id = s.warehouse_id AND l.sku_id = s.sku_id
			WHERE COALESCE(l.oh, 0) <> s.on_hand OR COALESCE(l.av, 0) <> s.available OR COALESCE(l.rs, 0) <> s.reserved
			   OR COALESCE(l.so, 0) <> s.sold OR COALESCE(l.n, 0) <> s.version OR COALESCE(l.v, 0) <> s.version`},
		{"ledger rows without their one event", `SELECT count(*) FROM inv_ledger l WHERE (SELECT count(*) FROM keel_events_outbox o
			WHERE o.topic = 'inventory.stock' AND o.event_id = CAST(l.id AS TEXT)) <> 1`},
		{"granted reservations without exactly one reserve row", `SELECT count(*) FROM inv_reservation r WHERE r.state <> 'failed'
			AND (SELECT count(*) FROM inv_ledger l WHERE l.reservation_id = r.id AND l.movement = 'reserve') <> 1`},
		{"reservations not at their end", `SELECT count(*) FROM inv_reservation WHERE state NOT IN ('confirmed', 'released', 'failed')`},
		{"confirmed reservations without one pick task", `SELECT count(*) FROM inv_reservation r WHERE r.state = 'confirmed'
			AND (SELECT count(*) FROM inv_pick_task p WHERE p.reservation_id = r.id) <> 1`},
		{"pick tasks of reservations not confirmed", `SELECT count(*) FROM inv_pick_task p JOIN inv_reservation r ON r.id = p.reservation_id
			WHERE r.state <> 'confirmed'`},
	}
	for _, c := range checks {
		if got := e.Count(t, c.query); got != 0 {
			t.Errorf("%d %s", got, c.what)
		}
	}
	if got := e.Count(t, "SELECT count(*) FROM inv_reservation WHERE order_line LIKE 'P%'"); got != lines {
		t.Errorf("%d reservations for %d order lines", got, lines)
	}
	t.Logf("%d ledger rows, %d confirmed reservations, %d pick tasks", ledger(), confirmed, picks())
}
