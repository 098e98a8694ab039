package cli_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/keelwork/keel/internal/cli"
	"github.com/keelwork/keel/internal/syncbuf"
	"github.com/keelwork/keel/internal/testwait"
)

// devPorts are module settings that give a test's `keel dev` free ports
// for the listeners that have fixed defaults (the delivery module's CMPP
// gateway, the alarm module's embedded MQTT broker): the package's tests
// run in parallel, and a taken default port fails a start or is (rightly)
// a WARN. The export demo's order table is 2,000 rows instead of 20,000,
// as for the test servers (testModuleSettings): building it kept a core
// busy under -race for work no dev test looks at. A setting of a module
// that is not running does nothing (TestDevRestartsOnItsData runs the
// payment module alone with it).
func devPorts() map[string]string {
	return map[string]string{"delivery.cmpp_addr": "127.0.0.1:0", "alarm.embedded_addr": "127.0.0.1:0", "export.demo_rows": "2000"}
}

// devRun is a `keel dev` a test started.
type devRun struct {
	out    *syncbuf.Buffer
	base   string // the console's URL
	cancel context.CancelFunc
	done   chan error    // what cli.Dev returned
	ended  chan struct{} // closed once cli.Dev has returned
}

// startDev starts `keel dev` on dir, with free ports, and waits until it
// is ready; the test's end stops it if the test did not.
func startDev(t *testing.T, dir string) *devRun {
	t.Helper()
	return startDevModules(t, dir, nil)
}

// startDevModules is startDev with only the named modules (nil: all).
func startDevModules(t *testing.T, dir string, modules []string) *devRun {
	t.Helper()
	r := &devRun{out: &syncbuf.Buffer{}, done: make(chan error, 1), ended: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	// A test that ends without stopping it stops it here and waits, so
	// the stop (and anything it logs or overruns) belongs to this test and
	// not to whichever runs next.
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.ended:
		case <-time.After(60 * time.Second):
			t.Errorf("keel dev did not stop within 60 s of the test's end:\n%s", r.out)
		}
	})
	ready := make(chan string, 1)
	go func() {
		err := cli.Dev(ctx, &cli.DevOpts{DataDir: dir, Addr: "127.0.0.1:0", Out: r.out, ModuleSettings: devPorts(),
			Ready: func(u string) { ready <- u }, Modules: modules})
		r.done <- err
		close(r.ended)
	}()
	select {
	case r.base = <-ready:
	case err := <-r.done:
		t.Fatalf("keel dev ended before it was ready: %v\n%s", err, r.out)
	case <-time.After(5 * time.Minute): // a bound for -race on a loaded machine; it takes a second alone
		t.Fatalf("keel dev not ready after 5 min:\n%s", r.out)
	}
	return r
}

// TestDevStartsAndStopsClean runs `keel dev` as the README tells a new
// user to: it starts, the leader's first reconciliation of every module
// runs (the inventory's shipments run failed at every start, with ERROR,
// because the demo's warehouse was pointed at only after it), the console
// answers, and a stop says what it waits for and ends without an error.
// Nothing on the way is logged at WARN or ERROR.
func TestDevStartsAndStopsClean(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := startDev(t, dir)
	out, base := r.out, r.base
	resp, err := http.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("console login page: %d", resp.StatusCode)
	}
	// SQLite's one writer is where a dev's work queues: the pool's waits
	// are on /metrics.
	scrape(t, base, `go_sql_wait_count_total{db_name="keel"}`)
	if v := scrape(t, base, `go_sql_max_open_connections{db_name="keel"}`); v <= 0 {
		t.Errorf("go_sql_max_open_connections is %v", v)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "keel.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The leader runs each scheduled reconciler once at start: wait until
	// the inventory's shipments run (the one that failed) has finished.
	var state, runErr string
	testwait.For(t, 3*time.Minute, "the first inventory.shipments reconciliation", func() bool {
		err := db.QueryRow(`SELECT state, error FROM keel_recon_run WHERE reconciler = 'inventory.shipments'
			AND state <> 'running' ORDER BY id LIMIT 1`).Scan(&state, &runErr)
		return err == nil
	})
	if state != "succeeded" {
		t.Errorf("the first shipments reconciliation %s: %s", state, runErr)
	}
	r.cancel()
	select {
	case err := <-r.done:
		// The stop is bounded by its grace period; alone it takes well
		// under a second and returns nil. Under -race on a loaded machine
		// the events consumers' handlers can outlast the grace, and the stop
		// says so in its error: bounded, not clean, which is logged here
		// rather than failed (the claim tested is the bound and the words).
		if err != nil && !strings.Contains(err.Error(), "context deadline exceeded") {
			t.Errorf("keel dev stopped with %v", err)
		} else if err != nil {
			t.Logf("keel dev's stop outlasted its grace period on this machine: %v", err)
		}
	case <-time.After(60 * time.Second): // the grace period is 15 s; the rest is -race on a loaded machine
		t.Fatalf("keel dev did not stop within 60 s:\n%s", out)
	}
	text := out.String()
	for _, l := range strings.Split(text, "\n") {
		if (strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN")) && !loadSymptom(l) {
			t.Errorf("keel dev logged: %s", l)
		}
	}
	for _, want := range []string{"keel: stopping", "keel: stopped in"} {
		if !strings.Contains(text, want) {
			t.Errorf("keel dev output lacks %q:\n%s", want, text)
		}
	}
}

// loadSymptom reports a WARN that is not a defect of the start: under
// -race on a machine running other suites heartbeats arrive late, leases
// expire and the engine says so, as it must; and the delivery demo's
// simulated customer leaves 5% of pushes unacknowledged by design (to show
// 未确认 records), which the CMPP gateway logs at WARN, as it does a
// response that comes after the ACK deadline. Work cut short by the stop
// itself is not warned about (a stop is not a failure): a WARN carrying
// "context canceled" is a defect here. A claim or a carrier delivery that
// ran out of time waiting for SQLite's one writer connection, which a
// starved process holds longer, is a symptom of the load too (seen in CI
// with load average 10 on two cores); it is still logged, and retried.
func loadSymptom(line string) bool {
	for _, s := range []string{"lease expired; job returned", "lease lost; stopping job",
		"stale commit rejected", "cmpp deliver_resp timed out", "cmpp late deliver_resp"} {
		if strings.Contains(line, s) {
			return true
		}
	}
	if strings.Contains(line, "context deadline exceeded") {
		return strings.Contains(line, `msg="claiming jobs"`) || strings.Contains(line, "cmpp: delivery window full")
	}
	return false
}

// TestDevRestartsOnItsData: a second `keel dev` on the same data folder,
// as a user starts it the next day, runs its demo as the first did: its
// demo payments are paid. The payment channels' simulator numbered its
// transactions from 1 on each start, so the second run's callbacks carried
// the first run's transaction ids, the module refused each as paying
// another order (WARN), and none of the new payments was paid.
func TestDevRestartsOnItsData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func(wait func(t *testing.T)) string {
		t.Helper()
		// The payment module alone: the claim is its demo's, and the other
		// six demos beside it kept a core busy under -race for nothing
		// (cmd/keel restarts keel dev with every module).
		r := startDevModules(t, dir, []string{"payment"})
		wait(t)
		r.cancel()
		select {
		case <-r.done:
		case <-time.After(60 * time.Second):
			t.Fatalf("keel dev did not stop within 60 s:\n%s", r.out)
		}
		return r.out.String()
	}
	paid := func(t *testing.T, want int) {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "keel.db")+"?mode=ro&_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		testwait.For(t, 3*time.Minute, fmt.Sprintf("%d paid demo payments", want), func() bool {
			var n int
			err := db.QueryRow(`SELECT count(*) FROM pay_payment WHERE payment_no LIKE 'DEMO%' AND state = 'paid'`).Scan(&n)
			return err == nil && n >= want
		})
	}
	// The demo pays four of its six payments and refunds one partly (still
	// paid); a second run adds four more.
	run(func(t *testing.T) { paid(t, 4) })
	second := run(func(t *testing.T) { paid(t, 8) })
	for _, l := range strings.Split(second, "\n") {
		// A callback cut off by the stop (the test stops keel dev as soon
		// as the payments are paid) is the stop's, not the demo's.
		if strings.Contains(l, "at stop were cut off") {
			continue
		}
		if strings.Contains(l, "disagrees with the order") || strings.Contains(l, "payment demo") {
			t.Errorf("second keel dev logged: %s", l)
		}
	}
}
