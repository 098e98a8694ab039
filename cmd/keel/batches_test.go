package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/server/api"
	"github.com/keelwork/keel/server/migration"
)

// TestBatchesOnPostgres runs the real binary in local mode on PostgreSQL:
// `batches list` (table and JSON), `batches pause` (refusals and success,
// audited as the CLI user) and the exit statuses of `batches watch`
// (Ctrl-C 130 without touching the batch, terminated 4).
func TestBatchesOnPostgres(t *testing.T) {
	t.Parallel()
	d, schema := testdb.OpenPostgres(t, &testdb.Options{Lines: migration.Lines})
	client, err := keel.NewClient(d, &keel.Config{Logger: slog.New(slog.DiscardHandler), BatchSigningKey: []byte("e2e batch key")})
	if err != nil {
		t.Fatal(err)
	}
	id := createBatch(t, client, 4)
	sid := strconv.FormatInt(id, 10)
	env := []string{"KEEL_DATABASE_URL=" + testdb.ServeURL(t, schema), "KEEL_SCHEMA=" + schema, "KEEL_SERVER="}

	out := keelOK(t, env, "batches", "list")
	if !regexp.MustCompile(`(?m)^` + sid + `\s+e2e\.items\s+e2e batch\s+running\s+0/4 \[\.{10}\]\s+\S+ \S+ UTC\S*\s+token:e2e$`).MatchString(out) {
		t.Fatalf("batches list:\n%s", out)
	}
	keelFails(t, env, 1, "keel: --reason is required: at least 5 characters", "batches", "pause", sid)
	keelFails(t, env, 1, "keel: --reason is required: at least 5 characters", "batches", "pause", sid, "--reason", "why")
	keelFails(t, env, 1, "keel: no batch 999999", "batches", "pause", "999999", "--reason", "downstream overloaded")
	keelFails(t, env, 1, `keel: invalid argument "many" for "--limit"`, "batches", "list", "--limit", "many")
	keelFails(t, env, 1, `keel: unknown batch state "stuck"`, "batches", "list", "--state", "stuck")
	if s := batchState(t, client, id); s != keeltype.BatchRunning {
		t.Fatalf("refused pauses left the batch %s", s)
	}
	if out = keelOK(t, env, "batches", "pause", sid, "--reason", "downstream overloaded"); !regexp.MustCompile(
		`^batch ` + sid + ` paused \(now paused by cli:\S+\)\n$`).MatchString(out) {
		t.Fatalf("batches pause: %q", out)
	}
	var page api.Page[*api.Batch]
	if err := json.Unmarshal([]byte(keelOK(t, env, "batches", "list", "--json", "--state", "paused")), &page); err != nil ||
		len(page.Data) != 1 || page.Data[0].Pause == nil || !strings.HasPrefix(page.Data[0].Pause.By, "cli:") {
		t.Fatalf("batches list --json: %v %+v", err, page)
	}

	p := start(t, env, "batches", "watch", sid, "--interval", "50ms")
	p.await(t, regexp.MustCompile(`^watching batch `+sid+` every 50ms`), 30*time.Second)
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := exitStatus(t, p.cmd.Wait()); code != 130 {
		t.Fatalf("watch stopped by Ctrl-C exited %d, want 130", code)
	}
	if s := batchState(t, client, id); s != keeltype.BatchPaused {
		t.Fatalf("Ctrl-C on watch left the batch %s", s)
	}
	keelOK(t, env, "batches", "terminate", sid, "--reason", "wrong window chosen")
	out = keelFails(t, env, 4, "batch "+sid+" terminated: 4/4 items done; success 0, failed 0, skipped 0, unprocessed 4",
		"batches", "watch", sid)
	if strings.Contains(out, "keel:") {
		t.Fatalf("watch printed an error for a terminated batch:\n%s", out)
	}
}

// keelRun runs the binary to its end and returns its output and status.
func keelRun(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = t.TempDir() // as in start: nothing written into the source tree
	out, err := cmd.CombinedOutput()
	return string(out), exitStatus(t, err)
}

func keelOK(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, code := keelRun(t, env, args...)
	if code != 0 {
		t.Fatalf("keel %v exited %d:\n%s", args, code, out)
	}
	return out
}

func keelFails(t *testing.T, env []string, code int, want string, args ...string) string {
	t.Helper()
	out, got := keelRun(t, env, args...)
	if got != code || !strings.Contains(out, want) {
		t.Fatalf("keel %v exited %d (want %d), output does not say %q:\n%s", args, got, code, want, out)
	}
	return out
}

func exitStatus(t *testing.T, err error) int {
	t.Helper()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func batchState[TTx any](t *testing.T, c *keel.Client[TTx], id int64) keeltype.BatchState {
	t.Helper()
	b, err := c.BatchGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return b.State
}

// createBatch makes a batch of n items through preview → create, as a
// module would; nothing works its items.
func createBatch[TTx any](t *testing.T, c *keel.Client[TTx], n int) int64 {
	t.Helper()
	ctx := keel.WithActor(context.Background(), "token:e2e")
	pv, err := keel.BatchPreviewOf(ctx, c, countSource{}, countFilter{N: n})
	if err != nil {
		t.Fatal(err)
	}
	b, err := keel.BatchCreate(ctx, c, countSource{}, pv.Token, keel.BatchOpts{Name: "e2e batch", Reason: "end-to-end test"})
	if err != nil {
		t.Fatal(err)
	}
	return b.ID
}

// countSource is a batch source of N numbered subjects on one key.
type countSource struct{}

type countFilter struct {
	N int `json:"n"`
}

func (countSource) Kind() string { return "e2e.items" }

func (countSource) Preview(_ context.Context, f countFilter, _ time.Time) (*keel.BatchPreview, error) {
	return &keel.BatchPreview{Hits: int64(f.N), Eligible: int64(f.N), DistinctKeys: 1}, nil
}

func (countSource) Subjects(_ context.Context, f countFilter, _ time.Time, emit func(string, string, keel.JobArgs) error) error {
	for i := range f.N {
		if err := emit(fmt.Sprintf("s%03d", i+1), "app:1", probeArgs{N: i}); err != nil {
			return err
		}
	}
	return nil
}
