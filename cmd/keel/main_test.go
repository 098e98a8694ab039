package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/server/api"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/migration"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "keel-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "keel")
	// Without -race: a race-built keel dev, with every module's demo
	// running, keeps a whole core busy (measured: 101% of one core against
	// 13% for this build), and with several of these processes beside the
	// other race-built packages two cores ran out and tests timed out
	// waiting for work a starved process had not done. The same code runs
	// under the race detector in process: internal/cli runs keel dev and
	// keel serve inside its race-built test binary, and every package's
	// own tests run with -race.
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building keel:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running keel process whose output lines are scanned.
type proc struct {
	cmd   *exec.Cmd
	lines chan string
	out   strings.Builder

	mu       sync.Mutex
	tail     []string      // the last lines written, for a failure's report
	readDone chan struct{} // closed when the output has been read to its end
}

// keep records line in the tail.
func (p *proc) keep(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.tail) == 1500 {
		p.tail = p.tail[1:]
	}
	p.tail = append(p.tail, line)
}

func (p *proc) tailText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// problems is the last n warning and error lines of the output.
func (p *proc) problems(n int) string {
	var out []string
	for _, l := range strings.Split(p.tailText(), "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			out = append(out, l)
		}
	}
	return strings.Join(out[max(0, len(out)-n):], "\n")
}

func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	// Its stop is bounded well inside the 20 s this helper waits for it: the
	// default (30 s for running jobs, then 5 s of backstop) would let a demo
	// job still running at SIGTERM outlast the wait on a loaded machine. A
	// test's own env, later in the list, overrides it.
	cmd.Env = append(append(os.Environ(), "KEEL_SHUTDOWN_TIMEOUT=10s"), env...)
	// A process of its own folder: what keel writes relative to where it
	// runs (`keel serve`'s exports under .keel/) stays out of the source tree.
	cmd.Dir = t.TempDir()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	p := &proc{cmd: cmd, lines: make(chan string, 1000), readDone: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.keep(sc.Text())
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		close(p.lines)
		close(p.readDone)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			// SIGQUIT: the Go runtime writes every goroutine's stack and
			// exits, so the report shows what the stop waited for.
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			_ = pw.Close()
			<-p.readDone
			t.Errorf("keel %v did not stop within 20s of SIGTERM; its last output:\n%s", args, p.tailText())
		}
		_ = pw.Close()
	})
	return p
}

// await reads output until a line matches re, and returns its submatches.
func (p *proc) await(t *testing.T, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("process ended before printing %s; output:\n%s", re, p.out.String())
			}
			p.out.WriteString(line + "\n")
			if m := re.FindStringSubmatch(line); m != nil {
				return m
			}
		case <-deadline:
			t.Fatalf("no line matching %s within %s; output:\n%s", re, within, p.out.String())
		}
	}
}

func getJSON(t *testing.T, url, token string, out any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

func post(t *testing.T, url, token string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
}

var (
	tokenLine   = regexp.MustCompile(`admin token \(shown once, stored hashed\): (keel_\S+)`)
	consoleLine = regexp.MustCompile(`keel dev: console (http://\S+)/`)
	existsLine  = regexp.MustCompile(`an admin token already exists`)
	listenLine  = regexp.MustCompile(`keel serve: listening on (http://\S+) `)
	// The stop's announcement and its end.
	stoppingLine = regexp.MustCompile(`keel: stopping \(at most 15s\): .*running jobs`)
	stoppedLine  = regexp.MustCompile(`keel: stopped in `)
)

// TestDevShowsMovingWork runs `keel dev` on a fresh data folder and waits
// (at most 60 s) until the API shows completed demo jobs; a rerun on the
// same folder resumes and does not print a new token.
func TestDevShowsMovingWork(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	devArgs := []string{"dev", "--data", dir, "--addr", "127.0.0.1:0", "--module-settings", "delivery.cmpp_addr=127.0.0.1:0,alarm.embedded_addr=127.0.0.1:0"}
	p := start(t, nil, devArgs...)
	natsURL := p.await(t, natsLine, 30*time.Second)[1]
	assertDevJetStream(t, natsURL)
	// The token is printed after the migrations and every module's start:
	// a few seconds for a race build alone, but beside three other test
	// packages on two cores it has taken more than 30. The wait ends as
	// soon as the line is there.
	token := p.await(t, tokenLine, 90*time.Second)[1]
	url := p.await(t, consoleLine, 30*time.Second)[1]
	assertDevRelaysToJetStream(t, p, filepath.Join(dir, "keel.db"), natsURL)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var page api.Page[*api.Job]
		var delivered struct{ Items []json.RawMessage }
		jobs := getJSON(t, url+"/api/v1/jobs?state=completed&limit=5", token, &page) == 200 && len(page.Data) > 0
		// The delivery module's simulators: a carrier's status report
		// pushed to a demo customer over CMPP and acknowledged by it.
		sms := getJSON(t, url+"/admin/operations/downstream-deliveries?status=delivered&size=10", token, &delivered) == 200 &&
			len(delivered.Items) > 0
		if jobs && sms {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 60s: completed demo jobs %v, delivered SMS records %v", jobs, sms)
		}
		time.Sleep(100 * time.Millisecond) // polling interval, not synchronization
	}
	// The reservation module's availability events travel on the embedded
	// broker, and its ordered inbox consumer takes them off it.
	awaitStreamMsgs(t, natsURL, "KEEL_RESERVATION", 1)
	awaitConsumed(t, natsURL, "KEEL_RESERVATION")
	before := p.out.Len()
	stopAt := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	// A stop says that it is stopping and what it waits for, ends within
	// its documented bound, and logs nothing it causes as an error.
	p.await(t, stoppingLine, 5*time.Second)
	p.await(t, stoppedLine, 20*time.Second)
	err := p.cmd.Wait()
	took := time.Since(stopAt)
	// Wait closed the pipe's writer side only at the cleanup; what the
	// process printed after "stopped" is already in the channel.
	for drained := false; !drained; {
		select {
		case line, ok := <-p.lines:
			if !ok {
				drained = true
				break
			}
			p.out.WriteString(line + "\n")
		case <-time.After(time.Second):
			drained = true
		}
	}
	if err != nil {
		t.Fatalf("keel dev did not stop cleanly on Ctrl-C: %v\n%s", err, p.out.String())
	}
	if took > 16*time.Second {
		t.Errorf("keel dev took %s to stop, more than its 15 s bound", took)
	}
	for _, line := range strings.Split(p.out.String()[before:], "\n") {
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("the stop logged an error: %s", line)
		}
	}
	again := start(t, nil, devArgs...)
	again.await(t, natsLine, 30*time.Second)
	again.await(t, existsLine, 90*time.Second) // after every module's start, as above
	url = again.await(t, consoleLine, 30*time.Second)[1]
	var page api.Page[*api.Job]
	if st := getJSON(t, url+"/api/v1/jobs?state=completed&limit=1", token, &page); st != 200 || len(page.Data) == 0 {
		t.Fatalf("rerun lost the data or the token: status %d, %d jobs", st, len(page.Data))
	}
}

// TestServesSharePause: two `keel serve` processes on one PostgreSQL;
// pausing a queue through one's API stops claims on both.
func TestServesSharePause(t *testing.T) {
	t.Parallel()
	d, schema := testdb.OpenPostgres(t, &testdb.Options{Lines: migration.Lines})
	dbURL := testdb.ServeURL(t, schema)
	ctx := context.Background()
	db := stdlib.OpenDBFromPool(d.Pool())
	defer db.Close()
	client, err := keel.NewClient(d, &keel.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	store := auth.NewStore(db, "postgres", auth.AuditedTxOf(keelsql.Pgx(d.Pool()), client))
	token, _, err := store.CreateToken(ctx, "two", auth.RoleOperator, "test", "two serves")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"KEEL_DATABASE_URL=" + dbURL, "KEEL_SCHEMA=" + schema, "KEEL_DEMO=true", "KEEL_LOG_LEVEL=warn",
		"KEEL_QUEUES=default=5,notify=5", "KEEL_ADDR=127.0.0.1:0", "KEEL_MODULE_SETTINGS=delivery.cmpp_addr=127.0.0.1:0,alarm.embedded_addr=127.0.0.1:0"}
	a := start(t, env, "serve")
	b := start(t, env, "serve")
	urlA := a.await(t, listenLine, 30*time.Second)[1]
	urlB := b.await(t, listenLine, 30*time.Second)[1]

	post(t, urlA+"/api/v1/queues/default/pause", token)
	paused := time.Now()
	// Both instances see the pause in the claim statement itself: once the
	// pause committed, nothing inserted afterwards is claimed by either.
	var ids []int64
	for i := range 20 {
		res, err := client.Insert(ctx, probeArgs{N: i}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
	}
	// Watch for three fetch poll intervals (1s each) plus the 1s bound.
	for time.Since(paused) < 4*time.Second {
		assertAll(t, client, ids, keeltype.JobStateAvailable)
		var q api.Page[*api.Queue]
		if getJSON(t, urlB+"/api/v1/queues", token, &q) != 200 {
			t.Fatal("instance B stopped answering")
		}
		time.Sleep(50 * time.Millisecond) // sampling interval of the observation
	}
	post(t, urlB+"/api/v1/queues/default/resume", token)
	deadline := time.Now().Add(20 * time.Second)
	for {
		rows, err := client.JobList(ctx, &keel.JobListParams{Kinds: []string{"probe"}, States: []keeltype.JobState{keeltype.JobStateAvailable}, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d probe jobs still available 20s after resume", len(rows))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type probeArgs struct {
	N int `json:"n"`
}

func (probeArgs) Kind() string { return "probe" }

func assertAll[TTx any](t *testing.T, c *keel.Client[TTx], ids []int64, want keeltype.JobState) {
	t.Helper()
	for _, id := range ids {
		j, err := c.JobGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != want {
			t.Fatalf("job %d is %s while its queue is paused (lease owner %q)", id, j.State, j.LeaseOwner)
		}
	}
}
