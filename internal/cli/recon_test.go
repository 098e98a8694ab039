package cli_test

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/cli"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelevents/eventsweb"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelrecon/recontest"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/server"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/migration"
)

// TestReconVerbs drives `keel recon` and `keel approvals` against a server
// hosting the reconciliation surface with the test ledger reconciler, on
// SQLite: run-now, list, get (evidence side by side), request by one
// operator, a refused self-approval, approval by another, execute, a
// refused second execute, and the next run's verification; bad input is
// refused before anything is sent.
func TestReconVerbs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := testdb.OpenSQLite(t, &testdb.Options{Lines: func(dialect string) []keelmigrate.Line {
		return append(migration.Lines(dialect), keelrecon.Lines(dialect)...)
	}})
	mdb := keelsql.SQLite(d.DB())
	client, err := keel.NewClient(d, &keel.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := keelrecon.New(mdb, &keelrecon.Config{ApproveAbove: map[string]int64{"": 10_000}})
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := recontest.NewLedger(ctx, mdb)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{rc.Register(ledger), rc.Start(ctx, client), ledger.Ours(ctx, "p-1", 10_000, "paid"),
		ledger.Theirs(ctx, "p-1", 60_000, "paid")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	w, err := eventsweb.New(&eventsweb.Config[*sql.Tx]{Recon: rc})
	if err != nil {
		t.Fatal(err)
	}
	store := auth.NewStore(d.DB(), "sqlite", auth.AuditedTxOf(mdb, client))
	srv, err := server.New(&server.Config{Addr: "127.0.0.1:0", Engine: client, Auth: store, Logger: slog.New(slog.DiscardHandler),
		Modules: []module.Web{w}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	tokens := map[string]string{}
	for _, n := range []string{"alice", "bob"} {
		if tokens[n], _, err = store.CreateToken(ctx, n, auth.RoleOperator, "test", "recon verbs"); err != nil {
			t.Fatal(err)
		}
	}
	run := func(user string, f func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error) (string, error) {
		var out, errOut bytes.Buffer
		o := &cli.AdminOpts{Server: srv.URL(), Token: tokens[user], Out: &out, Err: &errOut}
		err := cli.WithRemoteAPI(ctx, o, "recon", func(ctx context.Context, c *cli.APIClient) error { return f(ctx, c, o) })
		return out.String(), err
	}
	must := func(out string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := must(run("alice", func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
		return cli.ReconRunNow(ctx, c, o, "ledger", "")
	}))
	if !strings.Contains(out, "amount mismatch  1") || !strings.Contains(out, "500.00 CNY") {
		t.Fatalf("run-now:\n%s", out)
	}
	out = must(run("alice", func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
		return cli.ReconList(ctx, c, o, &cli.DiscrepancyFilter{State: "open"})
	}))
	if !regexp.MustCompile(`(?m)^1 +ledger +amount mismatch +p-1 +open +500\.00 CNY +four-eyes`).MatchString(out) {
		t.Fatalf("list:\n%s", out)
	}
	out = must(run("alice", func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
		return cli.ReconGet(ctx, c, o, "1")
	}))
	if !regexp.MustCompile(`(?m)^amount \* +100\.00 CNY +600\.00 CNY`).MatchString(out) || !regexp.MustCompile(`FIELD +OURS +CHANNEL`).MatchString(out) {
		t.Fatalf("get:\n%s", out)
	}
	act := func(user, action, id, reason string) (string, error) {
		return run(user, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
			return cli.ReconAction(ctx, c, o, action, id, reason)
		})
	}
	for _, bad := range []struct{ id, reason, want string }{
		{"1", "", "--reason is required"}, {"1", "a\x00bcdef", "--reason is required"}, {"x", "a good reason", "positive integer"},
		{"0", "a good reason", "positive integer"},
	} {
		if _, err := act("alice", "request", bad.id, bad.reason); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("request %q %q: %v", bad.id, bad.reason, err)
		}
	}
	if _, err := act("alice", "execute", "1", "just fix it now"); err == nil || !strings.Contains(err.Error(), "approval_required") {
		t.Fatalf("execute without approval: %v", err)
	}
	if _, err := act("alice", "request", "999", "no such discrepancy"); err == nil || !strings.Contains(err.Error(), "no discrepancy 999") {
		t.Fatalf("unknown id: %v", err)
	}
	if out := must(act("alice", "request", "1", "channel statement shows 600.00")); !strings.Contains(out, "now awaiting approval") {
		t.Fatalf("request: %s", out)
	}
	if _, err := act("alice", "approve", "1", "approving my own"); err == nil || !strings.Contains(err.Error(), "self_approval") {
		t.Fatalf("self-approval: %v", err)
	}
	out = must(run("bob", func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
		return cli.ApprovalsList(ctx, c, o, true, "", 0, 0)
	}))
	if !strings.Contains(out, "recon.action") || !strings.Contains(out, "token:alice") || !strings.Contains(out, "500.00 CNY") {
		t.Fatalf("bob's approvals:\n%s", out)
	}
	if out := must(run("bob", func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
		return cli.ApprovalAction(ctx, c, o, "approve", "1", "matches the statement")
	})); !strings.Contains(out, "now approved") {
		t.Fatalf("approve: %s", out)
	}
	if out := must(act("alice", "execute", "1", "apply the approved fix")); !strings.Contains(out, "now executed") {
		t.Fatalf("execute: %s", out)
	}
	if _, err := act("bob", "execute", "1", "double execute"); err == nil || !strings.Contains(err.Error(), "already_executed") {
		t.Fatalf("second execute: %v", err)
	}
	must(run("alice", func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
		return cli.ReconRunNow(ctx, c, o, "ledger", "")
	}))
	out = must(run("alice", func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
		return cli.ReconGet(ctx, c, o, "1")
	}))
	if !strings.Contains(out, "verified") || !strings.Contains(out, "verified by run") {
		t.Fatalf("after the next run:\n%s", out)
	}
	if n, _ := ledger.Fixes(ctx, "recon/1/1"); n != 1 {
		t.Fatalf("fix applied %d times", n)
	}
}
