package inventory

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/modules/inventory/domain"
	"github.com/keelwork/keel/modules/inventory/store"
)

// ApprovalKind is the kind of the adjustments that need a second approver.
const ApprovalKind = "inventory.adjust"

// AdjustRequest corrects a balance by Delta with a reason. Key is the
// adjustment's idempotency key (a count sheet line, a ticket).
type AdjustRequest struct {
	Key        string `json:"key"`
	Warehouse  string `json:"warehouse"`
	SKU        string `json:"sku"`
	Delta      int64  `json:"delta"`
	Reason     string `json:"reason"`
	ConflictID int64  `json:"-"`
}

func (r *AdjustRequest) check() error {
	err := errors.Join(domain.CheckID("key", r.Key), domain.CheckID("warehouse", r.Warehouse), domain.CheckID("sku", r.SKU),
		domain.CheckDelta(r.Delta))
	if len([]rune(r.Reason)) < 4 || len(r.Reason) > 500 {
		err = errors.Join(err, fmt.Errorf("%w: an adjustment needs a reason of 4 to 500 characters", errInvalid))
	}
	return err
}

// AdjustOutcome is an adjustment and, when it was booked, its result.
type AdjustOutcome struct {
	Adjustment store.Adjustment `json:"adjustment"`
	Result     Result           `json:"result"`
	ApprovalID int64            `json:"approval_id,omitempty"`
}

// Adjust books an explicit adjustment entry (never an overwrite): its
// value decides whether it is booked now or waits for a second approver.
func (m *Module[TTx]) Adjust(ctx context.Context, req AdjustRequest) (AdjustOutcome, error) {
	if err := req.check(); err != nil {
		return AdjustOutcome{}, err
	}
	var out AdjustOutcome
	err := m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		var err error
		out, err = m.adjustTx(ctx, tx, req)
		return err
	})
	return out, err
}

func (m *Module[TTx]) adjustTx(ctx context.Context, tx keelsql.Tx[TTx], req AdjustRequest) (AdjustOutcome, error) {
	var out AdjustOutcome
	if err := m.knownPair(ctx, tx, req.Warehouse, req.SKU); err != nil {
		return out, err
	}
	var id, zh, en, cur string
	var unit int64
	if err := tx.QueryRow(ctx, m.st.SQL("SkuGet"), req.SKU).Scan(&id, &zh, &en, &unit, &cur); err != nil {
		return out, err
	}
	abs := req.Delta
	if abs < 0 {
		abs = -abs
	}
	now := m.now()
	a := store.Adjustment{Intent: "adjust:" + req.Key, Warehouse: req.Warehouse, SKU: req.SKU, Delta: req.Delta,
		ValueMinor: abs * unit, Currency: cur, Reason: req.Reason, State: "pending", RequestedBy: actorOf(ctx),
		ConflictID: req.ConflictID, CreatedAt: now}
	needs := !noApproval(ctx) && m.approvals() != nil && a.ValueMinor > m.set.ApprovalMinor
	if needs {
		a.State = "awaiting_approval"
	}
	created, err := m.st.InsertAdjustment(ctx, tx, &a)
	if err != nil {
		return out, err
	}
	stored, err := m.st.GetAdjustment(ctx, tx, a.ID)
	if err != nil {
		return out, err
	}
	out.Adjustment = stored
	if !created {
		if stored.Warehouse != req.Warehouse || stored.SKU != req.SKU || stored.Delta != req.Delta {
			return out, fmt.Errorf("%w: adjustment %s was %s/%s %+d", ErrKeyReused, req.Key, stored.Warehouse, stored.SKU, stored.Delta)
		}
		out.Result = Result{Action: "adjust", Outcome: OutcomeDone, LedgerID: stored.LedgerID, Replayed: true}
		return out, nil
	}
	if needs {
		ap, err := m.approvals().RequestTx(ctx, tx, keelrecon.Request{Kind: ApprovalKind,
			Target:   "stock:" + StockKey(req.Warehouse, req.SKU),
			ActionID: a.Intent, Summary: fmt.Sprintf("%s/%s %+d", req.Warehouse, req.SKU, req.Delta),
			Amount: a.ValueMinor, Currency: cur, Reason: req.Reason})
		if err != nil {
			return out, fmt.Errorf("asking for approval: %w", err)
		}
		out.ApprovalID = ap.ID
		out.Result = Result{Action: "adjust", Outcome: "awaiting_approval"}
		return out, nil
	}
	res, err := m.applyAdjustment(ctx, tx, stored, actorOf(ctx))
	if err != nil {
		return out, err
	}
	out.Result = res
	out.Adjustment, err = m.st.GetAdjustment(ctx, tx, a.ID)
	return out, err
}

// applyAdjustment books adjustment a: one conditional UPDATE (available
// may not go negative), its ledger row and event, and the adjustment (and
// its conflict, if any) marked done, in tx.
func (m *Module[TTx]) applyAdjustment(ctx context.Context, tx keelsql.Tx[TTx], a store.Adjustment, approver string) (Result, error) {
	now := m.now()
	if _, err := m.st.Exec(ctx, tx, "StockInit", a.Warehouse, a.SKU, now); err != nil {
		return Result{}, err
	}
	st, ok, err := m.st.Move(ctx, tx, "StockAdjust", a.Warehouse, a.SKU, a.Delta, now)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		cur, err := m.classifyShort(ctx, tx, a.Warehouse, a.SKU, -a.Delta, func(s store.Stock) int64 { return s.Available })
		if err != nil {
			return Result{}, err
		}
		return Result{}, fmt.Errorf("%w: adjusting %s/%s by %d would leave available %d below zero", ErrState, a.Warehouse, a.SKU, a.Delta, cur.Available+a.Delta)
	}
	e, err := m.book(ctx, tx, domain.MoveAdjust, a.Intent, st, a.Delta, nil, a.Reason)
	if err != nil {
		return Result{}, err
	}
	n, err := m.st.Exec(ctx, tx, "AdjustmentApplied", a.ID, approver, e.ID, now)
	if err != nil {
		return Result{}, err
	}
	if n == 0 {
		return Result{}, fmt.Errorf("%w: adjustment %d is no longer pending", ErrState, a.ID)
	}
	if a.ConflictID != 0 {
		if _, err := m.st.Exec(ctx, tx, "ConflictResolve", a.ConflictID, "resolved", now,
			"adjustment "+strconv.FormatInt(a.ID, 10)+": "+a.Reason, a.ID); err != nil {
			return Result{}, err
		}
	}
	return Result{Action: "adjust", Outcome: OutcomeApplied, StockVersion: st.Version, LedgerID: e.ID}, nil
}

// ResolveRequest resolves a conflict ticket by an adjustment of Delta.
type ResolveRequest struct {
	Delta  int64  `json:"delta"`
	Reason string `json:"reason"`
}

// ResolveConflict resolves an open ticket with an explicit adjustment
// entry (over the threshold: once a second operator approves it).
func (m *Module[TTx]) ResolveConflict(ctx context.Context, id int64, req ResolveRequest) (AdjustOutcome, error) {
	var out AdjustOutcome
	err := m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		c, err := m.st.GetConflict(ctx, tx, id)
		if errors.Is(err, store.ErrNoRows) {
			return fmt.Errorf("%w: conflict %d", ErrNotFound, id)
		}
		if err != nil {
			return err
		}
		if c.State != "open" {
			return fmt.Errorf("%w: conflict %d is %s", ErrState, id, c.State)
		}
		ar := AdjustRequest{Key: "conflict-" + strconv.FormatInt(id, 10), Warehouse: c.Warehouse, SKU: c.SKU,
			Delta: req.Delta, Reason: req.Reason, ConflictID: id}
		if err := ar.check(); err != nil {
			return err
		}
		if out, err = m.adjustTx(ctx, tx, ar); err != nil {
			return err
		}
		if out.Adjustment.State == "awaiting_approval" {
			_, err = m.st.Exec(ctx, tx, "ConflictAwait", id, out.Adjustment.ID)
		}
		return err
	})
	return out, err
}

// approvals is the host's four-eyes capability, if any.
func (m *Module[TTx]) approvals() *keelrecon.Approvals[TTx] {
	if m.recon == nil {
		return nil
	}
	return m.recon.Approvals()
}

// registerApprovals declares the adjustment kind: an approval books the
// adjustment in the decision's transaction (marking the approval
// executed), a rejection closes it and reopens its conflict.
func (m *Module[TTx]) registerApprovals() error {
	if m.approvals() == nil {
		return nil
	}
	return m.approvals().RegisterKind(keelrecon.Kind[TTx]{Name: ApprovalKind, ZH: "库存调整", EN: "Stock adjustment",
		Decided: func(ctx context.Context, tx keelsql.Tx[TTx], ap *keelrecon.Approval) error {
			var id int64
			if err := tx.QueryRow(ctx, m.st.SQL("AdjustmentByIntent"), ap.ActionID).Scan(&id); err != nil {
				return fmt.Errorf("finding adjustment %s: %w", ap.ActionID, err)
			}
			a, err := m.st.GetAdjustment(ctx, tx, id)
			if err != nil {
				return err
			}
			if ap.State == keelrecon.ApprovalRejected {
				if _, err := m.st.Exec(ctx, tx, "AdjustmentRejected", id, ap.DecidedBy, m.now()); err != nil {
					return err
				}
				if a.ConflictID != 0 {
					_, err = tx.Exec(ctx, m.st.SQL("ConflictReopen"), a.ConflictID)
				}
				return err
			}
			if _, err := m.applyAdjustment(ctx, tx, a, ap.DecidedBy); err != nil {
				return err
			}
			_, err = m.approvals().MarkExecutedTx(ctx, tx, ap.ID, "booked on approval")
			return err
		}})
}

type noApprovalKey struct{}

func noApproval(ctx context.Context) bool { return ctx.Value(noApprovalKey{}) != nil }

// adjustNoApproval books an adjustment whose approval was given elsewhere
// (a reconciliation discrepancy's own four-eyes step).
func (m *Module[TTx]) adjustNoApproval(ctx context.Context, tx keelsql.Tx[TTx], req AdjustRequest) (AdjustOutcome, error) {
	return m.adjustTx(context.WithValue(ctx, noApprovalKey{}, true), tx, req)
}
