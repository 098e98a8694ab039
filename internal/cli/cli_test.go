package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/keelwork/keel/internal/cli"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/server/migration"
)

func TestResolveServePrecedence(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "keel.json")
	if err := os.WriteFile(file, []byte(`{"addr": ":9000", "queues": "a=3", "shutdown-timeout": "5s", "demo": true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KEEL_ADDR": ":9001", "KEEL_LOG_LEVEL": "warn"}
	o, err := cli.ResolveServe(file, func(k string) string { return env[k] }, map[string]string{"addr": ":9002"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Addr != ":9002" || o.LogLevel != "warn" || o.Queues["a"] != 3 || !o.Demo || o.ShutdownTimeout.String() != "5s" || !o.CookieSecure {
		t.Fatalf("resolved %+v", o)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	_ = os.WriteFile(bad, []byte(`{"adr": ":1"}`), 0o600)
	if _, err := cli.ResolveServe(bad, func(string) string { return "" }, nil); err == nil || !strings.Contains(err.Error(), "adr") {
		t.Fatalf("unknown file key: %v", err)
	}
	if _, err := cli.ResolveServe("", func(string) string { return "" }, map[string]string{"shutdown-timeout": "soon"}); err == nil {
		t.Fatal("bad duration accepted")
	}
}

// TestResolveServeModules: KEEL_MODULES=none runs no module (an empty
// variable reads as unset, so all), an empty --modules runs none, and an
// unknown name is refused with the installed ones named.
func TestResolveServeModules(t *testing.T) {
	t.Parallel()
	resolve := func(env map[string]string, flags map[string]string) ([]string, error) {
		o, err := cli.ResolveServe("", func(k string) string { return env[k] }, flags)
		if err != nil {
			return nil, err
		}
		return o.Modules, nil
	}
	if m, err := resolve(map[string]string{"KEEL_MODULES": "none"}, nil); err != nil || len(m) != 0 {
		t.Fatalf("KEEL_MODULES=none: %v, %v", m, err)
	}
	if m, err := resolve(map[string]string{"KEEL_MODULES": ""}, nil); err != nil || len(m) < 7 {
		t.Fatalf("KEEL_MODULES empty (unset): %v, %v", m, err)
	}
	if m, err := resolve(nil, map[string]string{"modules": ""}); err != nil || len(m) != 0 {
		t.Fatalf("--modules=: %v, %v", m, err)
	}
	if m, err := resolve(nil, map[string]string{"modules": "reservation, delivery"}); err != nil || len(m) != 2 {
		t.Fatalf("--modules=reservation,delivery: %v, %v", m, err)
	}
	if _, err := resolve(map[string]string{"KEEL_MODULES": "reservations"}, nil); err == nil || !strings.Contains(err.Error(), "installed:") {
		t.Fatalf("unknown module: %v", err)
	}
}

// TestLocalAdminVerbs drives the admin verbs against a local SQLite file:
// tokens, a bulk retry with its progress bar, and the audit trail naming
// the CLI user.
func TestLocalAdminVerbs(t *testing.T) {
	t.Parallel()
	d, path := testdb.OpenSQLite(t, &testdb.Options{Lines: migration.Lines})
	ctx := context.Background()
	var ids []int64
	for range 5 {
		res, err := d.Executor().JobInsertMany(ctx, []*keeldriver.JobInsertParams{{Kind: "x", Queue: "default",
			Args: []byte(`{}`), Priority: 2, MaxAttempts: 3}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res[0].Job.ID)
	}
	var out, errOut bytes.Buffer
	o := &cli.AdminOpts{DatabaseURL: "sqlite:" + path, Out: &out, Err: &errOut}
	run := func(f func(ctx context.Context, c *cli.APIClient) error) {
		t.Helper()
		out.Reset()
		errOut.Reset()
		if err := cli.WithAPI(ctx, o, f); err != nil {
			t.Fatalf("%v\n%s%s", err, out.String(), errOut.String())
		}
	}
	run(func(ctx context.Context, c *cli.APIClient) error {
		return cli.TokensCreate(ctx, c, o, "ci", "operator")
	})
	if !strings.Contains(out.String(), "keel_") {
		t.Fatalf("token not printed: %s", out.String())
	}
	run(func(ctx context.Context, c *cli.APIClient) error { return cli.TokensList(ctx, c, o) })
	if !strings.Contains(out.String(), "ci") || strings.Contains(out.String(), "keel_") {
		t.Fatalf("token list: %s", out.String())
	}
	for _, id := range ids[:3] {
		run(func(ctx context.Context, c *cli.APIClient) error {
			return cli.JobAction(ctx, c, o, "cancel", strconv.FormatInt(id, 10), "test cancellation")
		})
	}
	run(func(ctx context.Context, c *cli.APIClient) error {
		return cli.JobsRetryAll(ctx, c, o, &cli.JobFilter{States: []string{"cancelled"}, Kinds: []string{"x"}}, "bulk retry in the test")
	})
	if !strings.Contains(out.String(), "retried 3 of 3") || !strings.Contains(errOut.String(), "3/3") {
		t.Fatalf("bulk retry: %s / %s", out.String(), errOut.String())
	}
	rows, err := d.Executor().JobList(ctx, &keeldriver.JobListParams{States: []keeltype.JobState{keeltype.JobStateAvailable}, Limit: 10})
	if err != nil || len(rows) != 5 {
		t.Fatalf("after bulk retry %d available, %v", len(rows), err)
	}
	run(func(ctx context.Context, c *cli.APIClient) error {
		return cli.AuditList(ctx, c, o, "", "job.retry", "", 10, "")
	})
	if strings.Count(out.String(), "cli:") != 3 {
		t.Fatalf("audit: %s", out.String())
	}
	o.JSON = true
	run(func(ctx context.Context, c *cli.APIClient) error { return cli.QueuesList(ctx, c, o) })
	if !strings.HasPrefix(out.String(), `{"data":[`) {
		t.Fatalf("json: %s", out.String())
	}
}

// TestOperationsDocListsEverySetting keeps docs/operations.md in step with
// ServeSettings.
func TestOperationsDocListsEverySetting(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cli.ServeSettings {
		if !strings.Contains(string(doc), "`"+s.Env+"`") || !strings.Contains(string(doc), "`--"+s.Name+"`") {
			t.Errorf("docs/operations.md does not document %s / %s", s.Name, s.Env)
		}
	}
}
