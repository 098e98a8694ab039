package tracking

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/tracking/domain"
)

// The quota test's second Keel instance is another OS process: the test
// binary re-executed with helperEnv set. It opens the test's PostgreSQL
// schema, runs the module with the carriers it is given (their pull API is
// the parent's simulator), prints "ready" and works until its stdin
// closes, then stops as a server would. A line "completed" on its stdin is
// answered with the number of jobs its engine client completed, so the test
// can see that the other process really shared the work.
const (
	helperEnv      = "TRACKING_TEST_HELPER"
	helperDSN      = "TRACKING_HELPER_DSN"
	helperSchema   = "TRACKING_HELPER_SCHEMA"
	helperCarriers = "TRACKING_HELPER_CARRIERS"
	helperID       = "TRACKING_HELPER_ID"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		if err := helperMain(); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func helperMain() error {
	ctx := context.Background()
	var cs []domain.Carrier
	if err := json.Unmarshal([]byte(os.Getenv(helperCarriers)), &cs); err != nil {
		return fmt.Errorf("carriers: %w", err)
	}
	d, err := keelpgx.Open(ctx, os.Getenv(helperDSN), &keelpgx.Config{Schema: os.Getenv(helperSchema)})
	if err != nil {
		return err
	}
	defer d.Close()
	m, err := New(&module.Host[pgx.Tx]{DB: keelsql.Pgx(d.Pool()), Logger: moduletest.Quiet(), Settings: map[string]string{"tracking.backfill_recheck": "1s"}},
		WithCarriers(cs...))
	if err != nil {
		return err
	}
	// The same engine settings as startInstance's, so both processes claim
	// alike.
	reg := prometheus.NewRegistry()
	cfg := &keel.Config{ID: os.Getenv(helperID), Logger: moduletest.Quiet(), FetchPollInterval: 50 * time.Millisecond, PromoteInterval: 50 * time.Millisecond,
		RetryPolicy: &keel.JitterRetryPolicy{Base: 100 * time.Millisecond, Cap: 300 * time.Millisecond}, Registerer: reg}
	if err := m.Configure(cfg); err != nil {
		return err
	}
	client, err := keel.NewClient(d, cfg)
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	if err := m.Start(ctx, client); err != nil {
		return err
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "completed" {
			fmt.Println("completed", completed(reg))
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return errors.Join(m.Stop(sctx), client.StopAndCancel(sctx))
}

// completed sums keel_jobs_completed_total over its queues and kinds.
func completed(reg *prometheus.Registry) int {
	fams, err := reg.Gather()
	if err != nil {
		return -1
	}
	n := 0.0
	for _, f := range fams {
		if f.GetName() == "keel_jobs_completed_total" {
			for _, m := range f.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return int(n)
}

// proc is the other Keel process.
type proc struct {
	stdin io.Writer
	lines chan string
}

// Completed asks the process how many jobs it completed.
func (p *proc) Completed(t *testing.T) int {
	t.Helper()
	if _, err := fmt.Fprintln(p.stdin, "completed"); err != nil {
		t.Fatal(err)
	}
	select {
	case l, ok := <-p.lines:
		var n int
		if _, err := fmt.Sscanf(l, "completed %d", &n); !ok || err != nil {
			t.Fatalf("the other process answered %q", l)
		}
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("the other process did not answer within 30 s")
	}
	return 0
}

// startProcess runs a second Keel instance of the module as its own OS
// process on schema and waits until it is working; the test's cleanup
// stops it (stdin closed) and reports its failure, if any.
func startProcess(t *testing.T, dsn, schema, id string, cs []domain.Carrier) *proc {
	t.Helper()
	raw, err := json.Marshal(cs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", helperDSN+"="+dsn, helperSchema+"="+schema,
		helperCarriers+"="+string(raw), helperID+"="+id)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan error, 1)
	p := &proc{stdin: stdin, lines: make(chan string, 16)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- nil
				continue
			}
			p.lines <- sc.Text()
		}
		ready <- fmt.Errorf("the process ended before it was ready: %s", stderr.String())
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("instance %s: %v: %s", id, err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("instance %s did not stop within 30 s of its stdin closing", id)
		}
	})
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("instance %s not ready within 60 s: %s", id, stderr.String())
	}
	return p
}
