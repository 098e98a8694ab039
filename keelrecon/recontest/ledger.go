// Package recontest is a reconciler for tests of what is built on
// keelrecon (the operator surfaces, modules' approval flows): Ledger
// compares two tables of payments by key, as of the run's cutoff, and its
// fixes copy the counterpart's row into ours (or remove ours) in the
// execution's transaction, recording each action id once.
package recontest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
)

// Ledger is the test reconciler, named "ledger".
type Ledger[TTx any] struct {
	db keelsql.DB[TTx]
	// Executed counts Execute calls that wrote their fix.
	Executed atomic.Int64
}

// NewLedger creates its tables (recontest_ours, recontest_theirs,
// recontest_fix) on db.
func NewLedger[TTx any](ctx context.Context, db keelsql.DB[TTx]) (*Ledger[TTx], error) {
	for _, stmt := range []string{
		`CREATE TABLE recontest_ours (key TEXT PRIMARY KEY, amount BIGINT NOT NULL, status TEXT NOT NULL, at BIGINT NOT NULL)`,
		`CREATE TABLE recontest_theirs (key TEXT PRIMARY KEY, amount BIGINT NOT NULL, status TEXT NOT NULL, at BIGINT NOT NULL)`,
		`CREATE TABLE recontest_fix (action_id TEXT PRIMARY KEY, key TEXT NOT NULL)`,
	} {
		if _, err := db.Exec(ctx, stmt); err != nil {
			return nil, fmt.Errorf("creating the test ledgers: %w", err)
		}
	}
	return &Ledger[TTx]{db: db}, nil
}

func (l *Ledger[TTx]) q(s string) string {
	if l.db.Dialect() == "sqlite" {
		return strings.ReplaceAll(s, "$", "?")
	}
	return s
}

// Ours and Theirs write a payment (amount in CNY fen) into a ledger, dated
// an hour ago so that any cutoff from now on sees it.
func (l *Ledger[TTx]) Ours(ctx context.Context, key string, amount int64, status string) error {
	return l.put(ctx, "recontest_ours", key, amount, status)
}

// Theirs: see Ours.
func (l *Ledger[TTx]) Theirs(ctx context.Context, key string, amount int64, status string) error {
	return l.put(ctx, "recontest_theirs", key, amount, status)
}

func (l *Ledger[TTx]) put(ctx context.Context, table, key string, amount int64, status string) error {
	_, err := l.db.Exec(ctx, l.q("INSERT INTO "+table+" (key, amount, status, at) VALUES ($1, $2, $3, $4)"), key, amount, status,
		time.Now().Add(-time.Hour).UnixMicro())
	return err
}

// Fixes counts the fix rows of an action id.
func (l *Ledger[TTx]) Fixes(ctx context.Context, actionID string) (int, error) {
	var n int
	err := l.db.QueryRow(ctx, l.q("SELECT count(*) FROM recontest_fix WHERE action_id = $1"), actionID).Scan(&n)
	return n, err
}

// Name implements keelrecon.Reconciler.
func (l *Ledger[TTx]) Name() string { return "ledger" }

// RuleVersion implements keelrecon.Reconciler.
func (l *Ledger[TTx]) RuleVersion() string { return "v1" }

// Schedule implements keelrecon.Reconciler: on demand only.
func (l *Ledger[TTx]) Schedule() keel.Schedule { return nil }

type entry struct {
	Amount int64  `json:"amount"`
	Status string `json:"status"`
}

func (l *Ledger[TTx]) read(ctx context.Context, table string, cutoff time.Time) (map[string]entry, error) {
	rows, err := l.db.Query(ctx, l.q("SELECT key, amount, status FROM "+table+" WHERE at <= $1"), cutoff.UnixMicro())
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

func evidence(v entry) json.RawMessage {
	raw, _ := json.Marshal(map[string]any{"amount": v.Amount, "currency": "CNY", "status": v.Status})
	return raw
}

// Run implements keelrecon.Reconciler: missing on our side (book it),
// missing on theirs (reverse ours: always needs approval), amounts that
// differ (adjust to theirs) and statuses that differ (safe to heal).
func (l *Ledger[TTx]) Run(ctx context.Context, in keelrecon.RunInput) (keelrecon.RunOutput, error) {
	ours, err := l.read(ctx, "recontest_ours", in.Cutoff)
	if err != nil {
		return keelrecon.RunOutput{}, err
	}
	theirs, err := l.read(ctx, "recontest_theirs", in.Cutoff)
	if err != nil {
		return keelrecon.RunOutput{}, err
	}
	keys := map[string]bool{}
	for k := range ours {
		keys[k] = true
	}
	for k := range theirs {
		keys[k] = true
	}
	out := keelrecon.RunOutput{Compared: int64(len(keys))}
	for k := range keys {
		o, okO := ours[k]
		th, okT := theirs[k]
		d := keelrecon.Discrepancy{Key: k, Currency: "CNY", Evidence: map[string]json.RawMessage{}}
		if okO {
			d.Evidence["ours"] = evidence(o)
		}
		if okT {
			d.Evidence["channel"] = evidence(th)
		}
		switch {
		case !okO:
			d.Class, d.SuggestedAction, d.Impact = keelrecon.MissingOurs, "补记本地支付记录", th.Amount
		case !okT:
			d.Class, d.SuggestedAction, d.Impact, d.NeedsApproval = keelrecon.MissingTheirs, "冲正本地支付记录", -o.Amount, true
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

// Execute implements keelrecon.Reconciler.
func (l *Ledger[TTx]) Execute(ctx context.Context, tx keelsql.Tx[TTx], d *keelrecon.DiscrepancyRow, actionID string) error {
	if _, err := tx.Exec(ctx, l.q("INSERT INTO recontest_fix (action_id, key) VALUES ($1, $2)"), actionID, d.Key); err != nil {
		return fmt.Errorf("recording the fix: %w", err)
	}
	var err error
	if d.Class == keelrecon.MissingTheirs {
		_, err = tx.Exec(ctx, l.q("DELETE FROM recontest_ours WHERE key = $1"), d.Key)
	} else {
		_, err = tx.Exec(ctx, l.q(`INSERT INTO recontest_ours (key, amount, status, at)
			SELECT key, amount, status, at FROM recontest_theirs WHERE key = $1
			ON CONFLICT (key) DO UPDATE SET amount = excluded.amount, status = excluded.status`), d.Key)
	}
	if err == nil {
		l.Executed.Add(1)
	}
	return err
}
