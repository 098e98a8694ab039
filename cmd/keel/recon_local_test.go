package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelrecon/recontest"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/server/migration"
)

func localLines(dialect string) []keelmigrate.Line {
	lines := append(migration.Lines(dialect), keelevents.Line(dialect))
	return append(lines, keelrecon.Lines(dialect)...)
}

// TestEventsReconApprovalsLocal runs `keel events`, `keel recon` and
// `keel approvals` with no server, against the database, as the real
// binary on PostgreSQL and SQLite: the tables print, a discrepancy's
// approval is requested as the local operator and that operator's own
// approval is refused, and what needs a server's running code (replaying
// into a consumer, running a reconciler) says so and changes nothing.
func TestEventsReconApprovalsLocal(t *testing.T) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) {
		d, schema := testdb.OpenPostgres(t, &testdb.Options{Lines: localLines})
		env := []string{"KEEL_DATABASE_URL=" + testdb.ServeURL(t, schema), "KEEL_SCHEMA=" + schema, "KEEL_SERVER="}
		localVerbs[pgx.Tx](t, d, keelsql.Pgx(d.Pool()), env)
	})
	t.Run("sqlite", func(t *testing.T) {
		d, path := testdb.OpenSQLite(t, &testdb.Options{Lines: localLines})
		env := []string{"KEEL_DATABASE_URL=sqlite:" + path, "KEEL_SERVER="}
		localVerbs[*sql.Tx](t, d, keelsql.SQLite(d.DB()), env)
	})
}

func localVerbs[TTx any](t *testing.T, d keeldriver.Driver[TTx], db keelsql.DB[TTx], env []string) {
	ctx := context.Background()
	client, err := keel.NewClient(d, &keel.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// A discrepancy above the approval threshold, from a reconciler the
	// test process hosts (as a server would).
	rc, err := keelrecon.New(db, &keelrecon.Config{ApproveAbove: map[string]int64{"": 10_000}})
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := recontest.NewLedger(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{rc.Register(ledger), rc.Start(ctx, client), ledger.Ours(ctx, "p-1", 10_000, "paid"),
		ledger.Theirs(ctx, "p-1", 60_000, "paid")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rc.Run(ctx, "ledger", time.Now()); err != nil {
		t.Fatal(err)
	}
	// A poison event gone manual, from a consumer the test process ran.
	manualEvent(t, client, db)

	out := keelOK(t, env, "events", "topics")
	if !regexp.MustCompile(`(?m)^test\.poison\s+0\s`).MatchString(out) {
		t.Fatalf("events topics:\n%s", out)
	}
	if out = keelOK(t, env, "events", "consumers"); !regexp.MustCompile(`(?m)^poison\s+test\.poison\s`).MatchString(out) {
		t.Fatalf("events consumers:\n%s", out)
	}
	if out = keelOK(t, env, "events", "manual"); !regexp.MustCompile(`(?m)^1\s.*poison`).MatchString(out) {
		t.Fatalf("events manual:\n%s", out)
	}
	keelFails(t, env, 1, "needs the consumer running, which only a server does", "events", "replay", "1", "--reason", "the mapping is fixed")
	if out = keelOK(t, env, "events", "manual", "--state", "manual"); !regexp.MustCompile(`(?m)^1\s.*poison`).MatchString(out) {
		t.Fatalf("the refused replay changed the manual event:\n%s", out)
	}

	if out = keelOK(t, env, "recon", "list"); !regexp.MustCompile(`(?m)^1 +ledger +amount mismatch +p-1 +open +500\.00 CNY +four-eyes`).MatchString(out) {
		t.Fatalf("recon list:\n%s", out)
	}
	if out = keelOK(t, env, "recon", "get", "1"); !regexp.MustCompile(`FIELD +OURS +CHANNEL`).MatchString(out) {
		t.Fatalf("recon get:\n%s", out)
	}
	keelFails(t, env, 1, "needs the reconciler, which the server hosting its module registers", "recon", "run-now", "ledger")
	keelFails(t, env, 1, "--reason is required", "recon", "request", "1")
	if out = keelOK(t, env, "recon", "request", "1", "--reason", "channel statement shows 600.00"); !regexp.MustCompile(`now awaiting approval`).MatchString(out) {
		t.Fatalf("recon request:\n%s", out)
	}
	keelFails(t, env, 1, "self_approval", "recon", "approve", "1", "--reason", "approving my own")
	keelFails(t, env, 1, "self_approval", "approvals", "approve", "1", "--reason", "approving my own")
	var page struct {
		Data []keelrecon.Approval `json:"data"`
	}
	if err := json.Unmarshal([]byte(keelOK(t, env, "approvals", "list", "--json", "--state", "pending")), &page); err != nil ||
		len(page.Data) != 1 || !regexp.MustCompile(`^cli:`).MatchString(page.Data[0].RequestedBy) {
		t.Fatalf("approvals list: %v %+v", err, page)
	}
	// Nothing awaits the requester: the only request is their own.
	if out = keelOK(t, env, "approvals", "list", "--awaiting"); regexp.MustCompile(`recon\.action`).MatchString(out) {
		t.Fatalf("approvals awaiting the requester:\n%s", out)
	}
	if row, err := rc.GetDiscrepancy(ctx, 1); err != nil || row.State != keelrecon.StateAwaitingApproval {
		t.Fatalf("after the refusals: %+v %v", row, err)
	}
}

// manualEvent leaves one event manual: a consumer whose handler always
// fails, with a budget of one attempt.
func manualEvent[TTx any](t *testing.T, client *keel.Client[TTx], db keelsql.DB[TTx]) {
	t.Helper()
	ctx := context.Background()
	bus, err := keelevents.NewDatabaseBus(db, &keelevents.DatabaseBusConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	ev, err := keelevents.New(db, bus, &keelevents.Config{Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	err = ev.Consume(keelevents.Consumer[TTx]{Name: "poison", Topics: []string{"test.poison"}, MaxAttempts: 1,
		Handle: func(context.Context, keelsql.Tx[TTx], *keelevents.Delivery) error { return errPoison }})
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Start(ctx, client); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = ev.Stop(sctx)
	}()
	err = db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		return ev.EmitTx(ctx, tx, keelevents.Event{Topic: "test.poison", ID: "poison-1", Key: "k", Payload: json.RawMessage(`{"n":1}`)})
	})
	if err != nil {
		t.Fatal(err)
	}
	moduletest.WaitFor(t, 30*time.Second, "the poison event to go manual", func() bool {
		list, err := ev.ListManual(ctx, keelevents.ListParams{})
		return err == nil && len(list) == 1
	})
	// The relay marks an event published after the bus took it, so the
	// consumer can have failed it before the mark commits: wait for the
	// mark too, or `keel events topics` may still count it as backlog.
	moduletest.WaitFor(t, 30*time.Second, "the poison event marked published", func() bool {
		stats, err := ev.TopicStats(ctx)
		if err != nil {
			return false
		}
		for _, s := range stats {
			if s.Topic == "test.poison" {
				return s.Backlog == 0 && s.Published == 1
			}
		}
		return false
	})
}

var errPoison = errorString("poison event: the handler cannot apply it")

type errorString string

func (e errorString) Error() string { return string(e) }
