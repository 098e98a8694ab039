package keelrecon_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsqlite"
)

// env is one database with the recon line, the two ledgers the test
// reconciler compares, and an engine client that audits.
type env[TTx any] struct {
	t      *testing.T
	d      keeldriver.Driver[TTx]
	db     keelsql.DB[TTx]
	client *keel.Client[TTx]
	recon  *keelrecon.Recon[TTx]
	rec    *ledgerRec[TTx]
}

// both runs f on PostgreSQL and SQLite, each on its own database.
func both(t *testing.T, f func(t *testing.T, e *env[pgx.Tx]), g func(t *testing.T, e *env[*sql.Tx])) {
	t.Helper()
	bothClock(t, nil, f, g)
}

// bothClock is both with the recon line's clock set (nil: time.Now).
func bothClock(t *testing.T, now func() time.Time, f func(t *testing.T, e *env[pgx.Tx]), g func(t *testing.T, e *env[*sql.Tx])) {
	t.Helper()
	opts := &testdb.Options{Lines: keelrecon.Lines}
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		d, _ := testdb.OpenPostgres(t, opts)
		f(t, newEnvClock[pgx.Tx](t, d, keelsql.Pgx(d.Pool()), nil, now))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		d, _ := testdb.OpenSQLite(t, opts)
		g(t, newEnvClock[*sql.Tx](t, d, keelsql.SQLite(d.DB()), nil, now))
	})
}

var (
	_ keeldriver.Driver[pgx.Tx]  = (*keelpgx.Driver)(nil)
	_ keeldriver.Driver[*sql.Tx] = (*keelsqlite.Driver)(nil)
)

// newEnv builds the env; with sched the ledger reconciler runs on it, and
// cfg's client is started (its leader inserts the ticks).
func newEnv[TTx any](t *testing.T, d keeldriver.Driver[TTx], db keelsql.DB[TTx], sched keel.Schedule) *env[TTx] {
	t.Helper()
	return newEnvClock(t, d, db, sched, nil)
}

// newEnvClock is newEnv with the recon line's clock set (nil: time.Now).
func newEnvClock[TTx any](t *testing.T, d keeldriver.Driver[TTx], db keelsql.DB[TTx], sched keel.Schedule, now func() time.Time) *env[TTx] {
	t.Helper()
	ctx := context.Background()
	for _, stmt := range []string{
		`CREATE TABLE t_ours (key TEXT PRIMARY KEY, amount BIGINT NOT NULL, status TEXT NOT NULL, at BIGINT NOT NULL)`,
		`CREATE TABLE t_theirs (key TEXT PRIMARY KEY, amount BIGINT NOT NULL, status TEXT NOT NULL, at BIGINT NOT NULL)`,
		`CREATE TABLE t_fix (action_id TEXT PRIMARY KEY, key TEXT NOT NULL)`,
	} {
		if _, err := db.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	r, err := keelrecon.New(db, &keelrecon.Config{ApproveAbove: map[string]int64{"": 10_000}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	rec := &ledgerRec[TTx]{db: db, sched: sched}
	if err := r.Register(rec); err != nil {
		t.Fatal(err)
	}
	cfg := &keel.Config{FetchPollInterval: 50 * time.Millisecond}
	if err := r.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	c, err := keel.NewClient(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, c); err != nil {
		t.Fatal(err)
	}
	if sched != nil {
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = c.Stop(sctx)
		})
	}
	return &env[TTx]{t: t, d: d, db: db, client: c, recon: r, rec: rec}
}

// sql adapts a statement written with $n to the dialect.
func dialectSQL(dialect, q string) string {
	if dialect == "sqlite" {
		return strings.ReplaceAll(q, "$", "?")
	}
	return q
}

func (e *env[TTx]) exec(q string, args ...any) {
	e.t.Helper()
	if _, err := e.db.Exec(context.Background(), dialectSQL(e.db.Dialect(), q), args...); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
}

func (e *env[TTx]) count(q string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.db.QueryRow(context.Background(), dialectSQL(e.db.Dialect(), q), args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// seed writes a row into one ledger at a time before any cutoff used.
func (e *env[TTx]) seed(table, key string, amount int64, status string) {
	e.t.Helper()
	e.exec("INSERT INTO "+table+" (key, amount, status, at) VALUES ($1, $2, $3, $4)", key, amount, status,
		time.Now().Add(-time.Hour).UnixMicro())
}

func (e *env[TTx]) run(cutoff time.Time) *keelrecon.Run {
	e.t.Helper()
	run, err := e.recon.Run(as("ops-alice"), "ledger", cutoff)
	if err != nil {
		e.t.Fatal(err)
	}
	if run.State != "succeeded" {
		e.t.Fatalf("run %d %s: %s", run.ID, run.State, run.Error)
	}
	return run
}

func (e *env[TTx]) byKey(class keelrecon.Class, key string) *keelrecon.DiscrepancyRow {
	e.t.Helper()
	list, err := e.recon.ListDiscrepancies(context.Background(), keelrecon.DiscrepancyFilter{Class: class, Key: key})
	if err != nil || len(list) != 1 {
		e.t.Fatalf("discrepancy %s/%s: %v %d", class, key, err, len(list))
	}
	return list[0]
}

func (e *env[TTx]) audits(action string) int {
	e.t.Helper()
	list, err := e.client.AuditList(context.Background(), &keel.AuditListParams{Action: action, Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(list)
}

func as(user string) context.Context { return keel.WithActor(context.Background(), "user:"+user) }

// ledgerRec compares t_ours with t_theirs (the counterpart) by key, as of
// the cutoff. Its fixes copy the counterpart's row (or remove ours) and
// record the action id; executed counts Execute calls that committed
// through the framework.
type ledgerRec[TTx any] struct {
	db       keelsql.DB[TTx]
	sched    keel.Schedule
	executed atomic.Int64
	// only, when set, makes a run partial: it compares these keys alone.
	only []string
}

func (l *ledgerRec[TTx]) Name() string            { return "ledger" }
func (l *ledgerRec[TTx]) RuleVersion() string     { return "v1" }
func (l *ledgerRec[TTx]) Schedule() keel.Schedule { return l.sched }

type entry struct {
	Amount int64  `json:"amount"`
	Status string `json:"status"`
}

func (l *ledgerRec[TTx]) read(ctx context.Context, table string, cutoff time.Time) (map[string]entry, error) {
	rows, err := l.db.Query(ctx, dialectSQL(l.db.Dialect(), "SELECT key, amount, status FROM "+table+" WHERE at <= $1"), cutoff.UnixMicro())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]entry{}
	for rows.Next() {
		var k string
		var v entry
		if err := rows.Scan(&k, &v.Amount, &v.Status); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

func ev(v entry) json.RawMessage {
	raw, _ := json.Marshal(map[string]any{"amount": v.Amount, "status": v.Status})
	return raw
}

func (l *ledgerRec[TTx]) Run(ctx context.Context, in keelrecon.RunInput) (keelrecon.RunOutput, error) {
	ours, err := l.read(ctx, "t_ours", in.Cutoff)
	if err != nil {
		return keelrecon.RunOutput{}, err
	}
	theirs, err := l.read(ctx, "t_theirs", in.Cutoff)
	if err != nil {
		return keelrecon.RunOutput{}, err
	}
	out := keelrecon.RunOutput{}
	keys := map[string]bool{}
	for k := range ours {
		keys[k] = true
	}
	for k := range theirs {
		keys[k] = true
	}
	if l.only != nil {
		in := map[string]bool{}
		for _, k := range l.only {
			in[k] = true
		}
		for k := range keys {
			if !in[k] {
				delete(keys, k)
			}
		}
		out.Scope = &keelrecon.Scope{Name: "keys " + strings.Join(l.only, ", "),
			Covers: func(_ keelrecon.Class, key string) bool { return in[key] }}
	}
	out.Compared = int64(len(keys))
	for k := range keys {
		o, okO := ours[k]
		th, okT := theirs[k]
		d := keelrecon.Discrepancy{Key: k, Currency: "CNY", Evidence: map[string]json.RawMessage{}}
		if okO {
			d.Evidence["ours"] = ev(o)
		}
		if okT {
			d.Evidence["channel"] = ev(th)
		}
		switch {
		case !okO:
			d.Class, d.SuggestedAction, d.Impact = keelrecon.MissingOurs, "补记本地记录", th.Amount
		case !okT:
			d.Class, d.SuggestedAction, d.Impact, d.NeedsApproval = keelrecon.MissingTheirs, "冲正本地记录", -o.Amount, true
		case o.Amount != th.Amount:
			d.Class, d.SuggestedAction, d.Impact = keelrecon.AmountMismatch, "按渠道金额调整", th.Amount-o.Amount
		case o.Status != th.Status:
			d.Class, d.SuggestedAction, d.SafeAutoHeal, d.Currency = keelrecon.StatusMismatch, "按渠道状态更新", true, ""
		default:
			continue
		}
		out.Discrepancies = append(out.Discrepancies, d)
	}
	return out, nil
}

func (l *ledgerRec[TTx]) Execute(ctx context.Context, tx keelsql.Tx[TTx], d *keelrecon.DiscrepancyRow, actionID string) error {
	q := func(s string) string { return dialectSQL(l.db.Dialect(), s) }
	if _, err := tx.Exec(ctx, q("INSERT INTO t_fix (action_id, key) VALUES ($1, $2)"), actionID, d.Key); err != nil {
		return fmt.Errorf("recording the fix: %w", err)
	}
	var err error
	if d.Class == keelrecon.MissingTheirs {
		_, err = tx.Exec(ctx, q("DELETE FROM t_ours WHERE key = $1"), d.Key)
	} else {
		_, err = tx.Exec(ctx, q(`INSERT INTO t_ours (key, amount, status, at) SELECT key, amount, status, at FROM t_theirs WHERE key = $1
			ON CONFLICT (key) DO UPDATE SET amount = excluded.amount, status = excluded.status`), d.Key)
	}
	if err == nil {
		l.executed.Add(1)
	}
	return err
}
