package keelrecon_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
)

// TestApprovalsForOtherModules: a module registers a kind of its own
// (an inventory adjustment), asks in its own transaction, and gets the
// same four eyes and execution once as reconciliation.
func TestApprovalsForOtherModules(t *testing.T) {
	both(t, testApprovalKind[pgx.Tx], testApprovalKind[*sql.Tx])
}

func testApprovalKind[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	ap := e.recon.Approvals()
	var executed, decided atomic.Int64
	e.exec("CREATE TABLE t_stock (sku TEXT PRIMARY KEY, qty BIGINT NOT NULL)")
	e.exec("INSERT INTO t_stock (sku, qty) VALUES ('A-100', 10)")
	err := ap.RegisterKind(keelrecon.Kind[TTx]{Name: "inventory.adjust", ZH: "库存调整", EN: "Inventory adjustment",
		Decided: func(context.Context, keelsql.Tx[TTx], *keelrecon.Approval) error { decided.Add(1); return nil },
		Execute: func(ctx context.Context, tx keelsql.Tx[TTx], a *keelrecon.Approval) error {
			executed.Add(1)
			_, err := tx.Exec(ctx, dialectSQL(e.db.Dialect(), "UPDATE t_stock SET qty = qty - 3 WHERE sku = $1"), "A-100")
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ap.RegisterKind(keelrecon.Kind[TTx]{Name: "inventory.adjust"}); err == nil {
		t.Fatal("a kind registered twice")
	}
	req := keelrecon.Request{Kind: "inventory.adjust", Target: "sku:A-100", ActionID: "count-2026-12-01/A-100",
		Summary: "盘亏 3 件", Reason: "cycle count found 7"}
	var a *keelrecon.Approval
	err = e.db.InTx(as("alice"), func(tx keelsql.Tx[TTx]) error {
		var err error
		a, err = ap.RequestTx(as("alice"), tx, req)
		return err
	})
	if err != nil || a.State != keelrecon.ApprovalPending || a.RequestedBy != "user:alice" {
		t.Fatalf("request: %+v %v", a, err)
	}
	// The same request again is the same approval.
	again, err := ap.Request(as("alice"), req)
	if err != nil || again.ID != a.ID {
		t.Fatalf("repeat request: %+v %v", again, err)
	}
	if _, err := ap.Execute(as("bob"), a.ID, "before approval"); !errors.Is(err, keelrecon.ErrApprovalRequired) {
		t.Fatalf("execute pending: %v", err)
	}
	if _, err := ap.Approve(as("alice"), a.ID, "my own count"); !errors.Is(err, keelrecon.ErrSelfApproval) {
		t.Fatalf("self-approval: %v", err)
	}
	if _, err := ap.Approve(as("bob"), a.ID, "count sheet checked"); err != nil {
		t.Fatal(err)
	}
	if _, err := ap.Reject(as("carol"), a.ID, "too late to reject"); !errors.Is(err, keeltype.ErrInvalidState) {
		t.Fatalf("reject after approval: %v", err)
	}
	var wg sync.WaitGroup
	var ok atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := ap.Execute(as("carol"), a.ID, "apply the adjustment"); err == nil {
				ok.Add(1)
			} else if !errors.Is(err, keelrecon.ErrAlreadyExecuted) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 || executed.Load() != 1 || decided.Load() != 1 {
		t.Fatalf("executions %d (module %d), decisions %d", ok.Load(), executed.Load(), decided.Load())
	}
	if n := e.count("SELECT qty FROM t_stock WHERE sku = 'A-100'"); n != 7 {
		t.Fatalf("stock %d, want 7", n)
	}
	got, _ := ap.Get(ctx, a.ID)
	if got.State != keelrecon.ApprovalExecuted || got.ExecutedBy != "user:carol" || got.DecidedBy != "user:bob" {
		t.Fatalf("approval: %+v", got)
	}
	if e.audits("approval.request") != 1 || e.audits("approval.approve") != 1 || e.audits("approval.execute") != 1 {
		t.Fatal("approval steps not audited once each")
	}
}
