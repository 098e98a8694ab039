package cli_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/cli"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/server/api"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

// batchCLI runs the batch verbs against a servertest server as its
// operator, the way `keel --server URL` does.
type batchCLI struct {
	t           *testing.T
	e           *servertest.Env
	o           *cli.AdminOpts
	out, errOut bytes.Buffer
}

func newBatchCLI(t *testing.T, e *servertest.Env) *batchCLI {
	b := &batchCLI{t: t, e: e}
	b.o = &cli.AdminOpts{Server: e.Start(t), Token: e.Tokens[auth.RoleOperator], Out: &b.out, Err: &b.errOut}
	return b
}

// run runs one verb with fresh output buffers.
func (b *batchCLI) run(f func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error) error {
	b.out.Reset()
	b.errOut.Reset()
	return cli.WithAPI(context.Background(), b.o, func(ctx context.Context, c *cli.APIClient) error { return f(ctx, c, b.o) })
}

func (b *batchCLI) must(f func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error) string {
	b.t.Helper()
	if err := b.run(f); err != nil {
		b.t.Fatalf("%v\n%s%s", err, b.out.String(), b.errOut.String())
	}
	return b.out.String()
}

// fails runs a verb that must fail with an error containing every want.
func (b *batchCLI) fails(f func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error, want ...string) {
	b.t.Helper()
	err := b.run(f)
	if err == nil {
		b.t.Fatalf("no error; want %q\n%s", want, b.out.String())
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			b.t.Errorf("error %q does not say %q", err, w)
		}
	}
}

func (b *batchCLI) state(id int64) keeltype.BatchState {
	b.t.Helper()
	row, err := b.e.Engine.BatchGet(context.Background(), id)
	if err != nil {
		b.t.Fatal(err)
	}
	return row.State
}

func matches(t *testing.T, out, pattern string) {
	t.Helper()
	if !regexp.MustCompile(pattern).MatchString(out) {
		t.Fatalf("output does not match %s:\n%s", pattern, out)
	}
}

func list(f *cli.BatchFilter) func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
	return func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
		return cli.BatchesList(ctx, c, o, f)
	}
}

func get(id string) func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
	return func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
		return cli.BatchGet(ctx, c, o, id)
	}
}

func items(id string, f *cli.ItemFilter) func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
	return func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
		return cli.BatchItems(ctx, c, o, id, f)
	}
}

func action(act, id, reason string) func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
	return func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
		return cli.BatchAction(ctx, c, o, act, id, reason)
	}
}

func resumeKey(id, key, reason string) func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
	return func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
		return cli.BatchKeyResume(ctx, c, o, id, key, reason)
	}
}

// TestBatchesList pages and filters the batch list, as a table and as JSON.
func TestBatchesList(t *testing.T) {
	t.Parallel()
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		b := newBatchCLI(t, e)
		ctx := context.Background()
		older, err := e.CreateBatch(ctx, "token:setup", "incident 42 resend", 7)
		if err != nil {
			t.Fatal(err)
		}
		newer, err := e.CreateBatch(ctx, "token:setup", "incident 43 resend", 2)
		if err != nil {
			t.Fatal(err)
		}
		out := b.must(list(&cli.BatchFilter{}))
		matches(t, out, `(?m)^ID\s+KIND\s+NAME\s+STATE\s+PROGRESS\s+CREATED\s+OPERATOR$`)
		matches(t, out, fmt.Sprintf(`(?m)^%d\s+servertest\.items\s+servertest t\d+\s+running\s+0/7 \[\.{10}\]\s+\S+ \S+ UTC\S*\s+token:setup$`, older))

		out = b.must(list(&cli.BatchFilter{Limit: 1}))
		cursor := regexp.MustCompile(`more: --after (\S+)`).FindStringSubmatch(b.errOut.String())
		if !strings.HasPrefix(out, "ID") || !strings.Contains(out, "0/2") || strings.Contains(out, "0/7") || cursor == nil {
			t.Fatalf("first page of one (batch %d):\n%s%s", newer, out, b.errOut.String())
		}
		out = b.must(list(&cli.BatchFilter{Limit: 1, After: cursor[1]}))
		if !strings.Contains(out, "0/7") || strings.Contains(out, "0/2") {
			t.Fatalf("second page:\n%s", out)
		}
		if out = b.must(list(&cli.BatchFilter{States: []string{"paused", "terminated"}})); strings.Count(out, "\n") != 1 {
			t.Fatalf("state filter:\n%s", out)
		}
		b.fails(list(&cli.BatchFilter{States: []string{"stuck"}}), `unknown batch state "stuck"`, "partial_completed")
		b.fails(list(&cli.BatchFilter{Limit: 5000}), "limit must be an integer 1..1000")
		b.fails(list(&cli.BatchFilter{After: "nonsense"}), "invalid_cursor")

		b.o.JSON = true
		var page api.Page[*api.Batch]
		if err := json.Unmarshal([]byte(b.must(list(&cli.BatchFilter{Kind: "servertest.items"}))), &page); err != nil ||
			len(page.Data) != 2 || page.Data[0].ID != newer || page.Data[1].Progress.Total != 7 {
			t.Fatalf("json list: %v %s", err, b.out.String())
		}
	})
}

// TestBatchGetAndItems shows a batch with its counters and pages its items.
func TestBatchGetAndItems(t *testing.T) {
	t.Parallel()
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		b := newBatchCLI(t, e)
		id, err := e.CreateBatch(context.Background(), "token:setup", "incident 42 resend", 7)
		if err != nil {
			t.Fatal(err)
		}
		sid := strconv.FormatInt(id, 10)
		out := b.must(get(sid))
		for _, want := range []string{`(?m)^batch ` + sid + `  servertest\.items  servertest t\d+$`, `(?m)^state\s+running$`,
			`(?m)^reason\s+incident 42 resend$`, `(?m)^created\s+.* by token:setup$`, `(?m)^progress\s+\[\.{20}\] 0/7 0\.0%`,
			`(?m)^pace\s+queue default, 1 item\(s\)/s per key, a key pauses after 10 failures in a row$`,
			`(?m)^OUTCOME\s+ITEMS$`, `(?m)^success\s+0$`, `(?m)^waiting for external ACK\s+0$`, `(?m)^queued\s+7$`} {
			matches(t, out, want)
		}
		b.fails(get("999999"), "no batch 999999", "not_found")
		b.fails(get("seven"), `batch ID must be a positive integer, got "seven"`)

		out = b.must(items(sid, &cli.ItemFilter{Limit: 3, Outcome: "queued"}))
		matches(t, out, `(?m)^SUBJECT\s+OUTCOME\s+JOB\s+ATTEMPT\s+KEY\s+WHY$`)
		matches(t, out, `(?m)^t\d+-s001\s+queued\s+\d+\s+0/\d+\s+app:1\s*$`)
		cursor := regexp.MustCompile(`more: --after (\S+)`).FindStringSubmatch(b.errOut.String())
		if strings.Count(out, "\n") != 4 || cursor == nil {
			t.Fatalf("first page of items:\n%s%s", out, b.errOut.String())
		}
		out = b.must(items(sid, &cli.ItemFilter{Limit: 3, After: cursor[1]}))
		matches(t, out, `(?m)^t\d+-s004\s`)
		subject := regexp.MustCompile(`t\d+-s005`).FindString(out)
		if out = b.must(items(sid, &cli.ItemFilter{Key: subject})); strings.Count(out, "\n") != 2 || !strings.Contains(out, subject) {
			t.Fatalf("--key %s:\n%s", subject, out)
		}
		if out = b.must(items(sid, &cli.ItemFilter{Outcome: "success"})); strings.Count(out, "\n") != 1 {
			t.Fatalf("no item succeeded yet:\n%s", out)
		}
		b.fails(items(sid, &cli.ItemFilter{Outcome: "lost"}), `unknown outcome "lost"`, "waiting_external_ack")
		b.fails(items("999999", &cli.ItemFilter{}), "no batch 999999", "not_found")

		b.o.JSON = true
		var d struct {
			api.Batch
			SkipReasons map[string]int64 `json:"skip_reasons"`
		}
		if err := json.Unmarshal([]byte(b.must(get(sid))), &d); err != nil || d.ID != id || d.Counts[keeltype.OutcomeQueued] != 7 {
			t.Fatalf("json get: %v %s", err, b.out.String())
		}
		var page api.Page[*api.BatchItem]
		if err := json.Unmarshal([]byte(b.must(items(sid, &cli.ItemFilter{Limit: 2}))), &page); err != nil ||
			len(page.Data) != 2 || page.NextCursor == "" {
			t.Fatalf("json items: %v %s", err, b.out.String())
		}
	})
}

// TestBatchControl pauses, resumes a key, resumes and terminates a batch,
// and refuses actions without a proper reason or on an unknown batch.
func TestBatchControl(t *testing.T) {
	t.Parallel()
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		b := newBatchCLI(t, e)
		ctx := context.Background()
		id, err := e.CreateBatch(ctx, "token:setup", "incident 42 resend", 7)
		if err != nil {
			t.Fatal(err)
		}
		sid := strconv.FormatInt(id, 10)
		for _, reason := range []string{"", "why", "  ok  "} {
			b.fails(action("pause", sid, reason), "--reason is required", "at least 5 characters")
			b.fails(resumeKey(sid, "app:1", reason), "--reason is required")
		}
		if s := b.state(id); s != keeltype.BatchRunning {
			t.Fatalf("refused pause changed the batch to %s", s)
		}
		b.fails(action("pause", "999999", "downstream overloaded"), "no batch 999999", "not_found")
		b.fails(action("pause", "0", "downstream overloaded"), "positive integer")
		b.fails(resumeKey("999999", "app:1", "gateway recovered"), "no batch 999999", "not_found")

		out := b.must(action("pause", sid, "downstream overloaded"))
		if out != fmt.Sprintf("batch %d paused (now paused by token:t-operator)\n", id) {
			t.Fatalf("pause: %q", out)
		}
		b.fails(action("pause", sid, "pause it again"), "invalid_state")
		matches(t, b.must(get(sid)), `(?m)^paused because\s+downstream overloaded$`)

		if _, err := e.Engine.FlowKeyPause(ctx, keel.BatchKeyPrefix(id)+"app:2", "gateway flaky"); err != nil {
			t.Fatal(err)
		}
		out = b.must(get(sid))
		matches(t, out, `(?m)^PAUSED KEY\s+SINCE\s+FAILURES\s+WHY\s+LAST ERROR$`)
		matches(t, out, `(?m)^app:2\s+\S+ \S+ UTC\S*\s+0\s+`)
		matches(t, out, `resume one with: keel batches resume-key `+sid+` KEY --reason TEXT`)
		if out = b.must(resumeKey(sid, "app:2", "gateway recovered")); out != "batch "+sid+" key app:2 resumed\n" {
			t.Fatalf("resume-key: %q", out)
		}
		if out = b.must(get(sid)); strings.Contains(out, "PAUSED KEY") {
			t.Fatalf("key still paused:\n%s", out)
		}

		matches(t, b.must(action("resume", sid, "downstream recovered")), `^batch `+sid+` resumed \(now (queued|running)\)\n$`)
		out = b.must(action("terminate", sid, "wrong window chosen"))
		if out != "batch "+sid+" terminated (now terminated)\n7 item(s) never started are unprocessed; items already started finish on their own\n" {
			t.Fatalf("terminate: %q", out)
		}
		b.fails(action("resume", sid, "too late for this"), "invalid_state")

		other, err := e.CreateBatch(ctx, "token:setup", "incident 44 resend", 1)
		if err != nil {
			t.Fatal(err)
		}
		b.o.JSON = true
		var v api.Batch
		if err := json.Unmarshal([]byte(b.must(action("pause", strconv.FormatInt(other, 10), "hold for review"))), &v); err != nil ||
			v.State != keeltype.BatchPaused || v.Pause == nil || v.Pause.Note != "hold for review" {
			t.Fatalf("json pause: %v %s", err, b.out.String())
		}
	})
}

// TestBatchWatch works items to real outcomes and watches batches end:
// partially completed (3), completed (0), terminated while watched (4),
// and Ctrl-C, which stops the watching and leaves the batch alone (130).
func TestBatchWatch(t *testing.T) {
	t.Parallel()
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		b := newBatchCLI(t, e)
		ctx := context.Background()
		ids := map[string]string{}
		for _, name := range []string{"mixed", "good", "held", "interrupted"} {
			id, err := e.CreateBatch(ctx, "token:setup", "incident 42 resend", 3)
			if err != nil {
				t.Fatal(err)
			}
			ids[name] = strconv.FormatInt(id, 10)
		}
		// Held back from the workers, to be watched while they change.
		b.must(action("pause", ids["held"], "hold for the watch"))
		b.must(action("pause", ids["interrupted"], "hold for the watch"))
		mixed := subjects(t, e, ids["mixed"])
		work(t, e, map[string]error{mixed[1]: keel.JobSkip("already_delivered"),
			mixed[2]: keel.JobPermanent(errors.New("rejected by gateway"))})

		sid := ids["mixed"]
		wantExit(t, b.run(watch(sid, 10*time.Millisecond)), cli.ExitPartial)
		matches(t, b.out.String(), `^batch `+sid+` partially completed: 3/3 items done; success 1, failed 1, skipped 1, unprocessed 0 \(took \S+\)\n$`)
		matches(t, b.errOut.String(), `^watching batch `+sid+` every 10ms; Ctrl-C stops watching, not the batch\n`)
		matches(t, b.errOut.String(), `\r\[#{30}\] 3/3 100\.0%  \S+/s  failed 1  skipped 1  waiting 0  partially completed *\n$`)
		out := b.must(get(sid))
		matches(t, out, `(?m)^skipped\s+1\n  because already_delivered\s+1$`)
		matches(t, out, `(?m)^failed\s+1$`)
		matches(t, b.must(items(sid, &cli.ItemFilter{Outcome: "skipped"})), `(?m)^\S+\s+skipped\s+\d+\s+1/\d+\s+app:2\s+already_delivered$`)
		matches(t, b.must(items(sid, &cli.ItemFilter{Outcome: "failed"})), `(?m)^\S+\s+failed\s+\d+\s+1/\d+\s+app:3\s+.*rejected by gateway$`)

		good := ids["good"]
		wantExit(t, b.run(watch(good, time.Second)), cli.ExitCompleted)
		matches(t, b.out.String(), `^batch `+good+` completed: 3/3 items done; success 3, failed 0, skipped 0, unprocessed 0`)
		b.o.JSON = true
		wantExit(t, b.run(watch(good, time.Second)), cli.ExitCompleted)
		var last api.Batch
		if err := json.Unmarshal(b.out.Bytes(), &last); err != nil || last.State != keeltype.BatchCompleted ||
			strings.Count(b.out.String(), "\n") != 1 || b.errOut.Len() != 0 {
			t.Fatalf("json watch: %v %q %q", err, b.out.String(), b.errOut.String())
		}
		b.o.JSON = false

		out = watchWhile(t, b, ctx, ids["held"], func() { b.must(action("terminate", ids["held"], "wrong window chosen")) },
			cli.ExitTerminated)
		matches(t, out, `(?m)^batch `+ids["held"]+` terminated: 3/3 items done; success 0, failed 0, skipped 0, unprocessed 3`)

		stop, cancel := context.WithCancel(ctx)
		defer cancel()
		out = watchWhile(t, b, stop, ids["interrupted"], cancel, cli.ExitInterrupted)
		matches(t, out, `stopped watching batch `+ids["interrupted"]+` \(last seen paused by token:t-operator\); the batch itself was not touched\n$`)
		if id, _ := strconv.ParseInt(ids["interrupted"], 10, 64); b.state(id) != keeltype.BatchPaused {
			t.Fatalf("Ctrl-C changed the batch to %s", b.state(id))
		}

		b.fails(watch("999999", time.Second), "no batch 999999", "not_found")
		b.fails(watch(good, 0), "--interval must be positive")
	})
}

func watch(id string, every time.Duration) func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
	return func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
		return cli.BatchWatch(ctx, c, o, id, every)
	}
}

func wantExit(t *testing.T, err error, code int) {
	t.Helper()
	var exit *cli.ExitError
	switch {
	case code == cli.ExitCompleted && err != nil:
		t.Fatalf("watch: %v", err)
	case code != cli.ExitCompleted && (!errors.As(err, &exit) || exit.Code != code):
		t.Fatalf("watch ended with %v, want exit status %d", err, code)
	}
}

// watchWhile watches batch id in the background, calls then once the
// progress line was drawn, and returns the watch's output once it ended
// with exit status code.
func watchWhile(t *testing.T, b *batchCLI, ctx context.Context, id string, then func(), code int) string {
	t.Helper()
	w := &drawnWriter{drawn: make(chan struct{})}
	o := *b.o
	o.Out, o.Err = w, w
	done := make(chan error, 1)
	go func() {
		done <- cli.WithAPI(ctx, &o, func(ctx context.Context, c *cli.APIClient) error {
			return cli.BatchWatch(ctx, c, &o, id, 10*time.Millisecond)
		})
	}()
	select {
	case <-w.drawn:
	case err := <-done:
		t.Fatalf("watch of batch %s ended before drawing: %v\n%s", id, err, w.String())
	}
	then()
	wantExit(t, <-done, code)
	return w.String()
}

// drawnWriter collects a watch's output and closes drawn once the first
// progress line is out.
type drawnWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	drawn chan struct{}
}

func (w *drawnWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), "\r[")
	n, err := w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), "\r[") {
		close(w.drawn)
	}
	return n, err
}

func (w *drawnWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// subjects lists a batch's item subjects in order.
func subjects(t *testing.T, e *servertest.Env, id string) []string {
	t.Helper()
	n, _ := strconv.ParseInt(id, 10, 64)
	rows, err := e.Engine.BatchItems(context.Background(), &keel.BatchItemsParams{BatchID: n, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.Subject)
	}
	return out
}

// work runs the env's batch items on a second client over the same
// database: each item ends as verdicts says for its subject (success when
// absent). The client also leads, so batches finish.
func work(t *testing.T, e *servertest.Env, verdicts map[string]error) {
	t.Helper()
	switch c := e.Engine.(type) {
	case *keel.Client[pgx.Tx]:
		startWorkers(t, c.Driver(), verdicts)
	case *keel.Client[*sql.Tx]:
		startWorkers(t, c.Driver(), verdicts)
	default:
		t.Fatalf("engine %T", e.Engine)
	}
}

func startWorkers[TTx any](t *testing.T, d keeldriver.Driver[TTx], verdicts map[string]error) {
	t.Helper()
	ws := keel.NewWorkers()
	keel.AddWorker(ws, keel.WorkerFunc[servertest.ItemArgs](func(_ context.Context, j *keel.Job[servertest.ItemArgs]) error {
		return verdicts[j.Args.Subject]
	}))
	c, err := keel.NewClient(d, &keel.Config{Workers: ws, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
}
