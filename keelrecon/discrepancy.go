package keelrecon

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
)

// RequestApproval asks a second operator to approve an open discrepancy's
// action: an approval request (kind ApprovalKind, the generation's action
// id) and open → awaiting_approval, audited, in one transaction.
func (r *Recon[TTx]) RequestApproval(ctx context.Context, id int64, reason string) (*DiscrepancyRow, error) {
	reason, err := CheckReason(reason)
	if err != nil {
		return nil, err
	}
	c, err := r.engine(ctx)
	if err != nil {
		return nil, err
	}
	err = r.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		d, err := r.get(ctx, tx, id)
		if err != nil {
			return err
		}
		if _, ok := Next(d.State, EventRequest, d.NeedsApproval); !ok {
			return r.refusal(d, EventRequest)
		}
		actionID := ActionIDFor(d.ID, d.Generation)
		ap, err := r.approvals.RequestTx(ctx, tx, Request{Kind: ApprovalKind, Target: approvalTarget(d), ActionID: actionID,
			Summary: d.SuggestedAction, Amount: d.Impact, Currency: d.Currency, Reason: reason})
		if err != nil {
			return err
		}
		n, err := tx.Exec(ctx, r.q.Get("DiscrepancyRequest"), d.ID, d.Generation, ap.ID, actionID, r.now())
		if err != nil {
			return fmt.Errorf("requesting approval for discrepancy %d: %w", id, err)
		}
		if n == 0 {
			return r.refusalNow(ctx, tx, id, EventRequest)
		}
		return c.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "recon.discrepancy.request", Target: discrepancyTarget(id),
			Reason: reason, Context: map[string]any{"approval_id": ap.ID, "action_id": actionID, "impact": d.Impact, "currency": d.Currency}})
	})
	if err != nil {
		return nil, err
	}
	return r.GetDiscrepancy(ctx, id)
}

// Approve approves the discrepancy's pending request (not by its
// requester: ErrSelfApproval).
func (r *Recon[TTx]) Approve(ctx context.Context, id int64, reason string) (*DiscrepancyRow, error) {
	return r.decide(ctx, id, ApprovalApproved, reason)
}

// Reject rejects the discrepancy's pending request (not by its requester).
func (r *Recon[TTx]) Reject(ctx context.Context, id int64, reason string) (*DiscrepancyRow, error) {
	return r.decide(ctx, id, ApprovalRejected, reason)
}

func (r *Recon[TTx]) decide(ctx context.Context, id int64, to ApprovalState, reason string) (*DiscrepancyRow, error) {
	reason, err := CheckReason(reason)
	if err != nil {
		return nil, err
	}
	err = r.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		d, err := r.get(ctx, tx, id)
		if err != nil {
			return err
		}
		if d.State != StateAwaitingApproval || d.ApprovalID == nil {
			return r.refusal(d, EventApprove)
		}
		_, err = r.approvals.DecideTx(ctx, tx, *d.ApprovalID, to, reason)
		return err
	})
	if err != nil {
		return nil, err
	}
	return r.GetDiscrepancy(ctx, id)
}

// decided is the approval kind's hook: the discrepancy follows its
// approval's decision in the same transaction.
func (r *Recon[TTx]) decided(ctx context.Context, tx keelsql.Tx[TTx], ap *Approval) error {
	id, err := targetID(ap.Target)
	if err != nil {
		return err
	}
	to := StateApproved
	if ap.State == ApprovalRejected {
		to = StateRejected
	}
	n, err := tx.Exec(ctx, r.q.Get("DiscrepancyDecide"), id, ap.ID, string(to), r.now())
	if err != nil {
		return fmt.Errorf("moving discrepancy %d after approval %d: %w", id, ap.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: discrepancy %d no longer awaits approval %d", keeltype.ErrInvalidState, id, ap.ID)
	}
	c, err := r.engine(ctx)
	if err != nil {
		return err
	}
	return c.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "recon.discrepancy." + map[State]string{StateApproved: "approve",
		StateRejected: "reject"}[to], Target: discrepancyTarget(id), Reason: ap.DecisionReason,
		Context: map[string]any{"approval_id": ap.ID, "requested_by": ap.RequestedBy}})
}

// Execute performs the discrepancy's action once, as keel.ActorFrom(ctx):
// from approved (its approval moves to executed in the same transaction),
// or from open when it needs no approval (ErrApprovalRequired otherwise).
// A second or concurrent call gets ErrAlreadyExecuted.
func (r *Recon[TTx]) Execute(ctx context.Context, id int64, reason string) (*DiscrepancyRow, error) {
	reason, err := CheckReason(reason)
	if err != nil {
		return nil, err
	}
	if err := r.execute(ctx, id, reason, false); err != nil {
		return nil, err
	}
	return r.GetDiscrepancy(ctx, id)
}

func (r *Recon[TTx]) execute(ctx context.Context, id int64, reason string, auto bool) error {
	if _, err := r.engine(ctx); err != nil {
		return err
	}
	return r.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		d, err := r.get(ctx, tx, id)
		if err != nil {
			return err
		}
		switch {
		case d.State == StateApproved && d.ApprovalID != nil && !auto:
			ap, err := r.approvals.MarkExecutedTx(ctx, tx, *d.ApprovalID, reason)
			if err != nil {
				return err
			}
			return r.executeTx(ctx, tx, d, StateApproved, ap.ActionID, reason)
		case d.State == StateOpen && !d.NeedsApproval:
			ev := EventExecute
			if auto {
				ev = EventAutoHeal
			}
			return r.executeTx(ctx, tx, d, StateOpen, ActionIDFor(d.ID, d.Generation), reason, ev)
		}
		return r.refusal(d, EventExecute)
	})
}

// executeApproved is the approval kind's Execute (Approvals.Execute from
// the approvals page): the approval was just marked executed in tx.
func (r *Recon[TTx]) executeApproved(ctx context.Context, tx keelsql.Tx[TTx], ap *Approval) error {
	id, err := targetID(ap.Target)
	if err != nil {
		return err
	}
	d, err := r.get(ctx, tx, id)
	if err != nil {
		return err
	}
	return r.executeTx(ctx, tx, d, StateApproved, ap.ActionID, "approval "+strconv.FormatInt(ap.ID, 10)+" executed")
}

// executeTx is the one conditional UPDATE that makes the action happen
// once, then the reconciler's Execute in the same transaction, audited.
func (r *Recon[TTx]) executeTx(ctx context.Context, tx keelsql.Tx[TTx], d *DiscrepancyRow, from State, actionID, reason string, ev ...Event) error {
	event := EventExecute
	if len(ev) > 0 {
		event = ev[0]
	}
	to, ok := Next(from, event, d.NeedsApproval && from == StateOpen)
	if !ok {
		return r.refusal(d, event)
	}
	rec, err := r.Reconciler(d.Reconciler)
	if err != nil {
		return err
	}
	c, err := r.engine(ctx)
	if err != nil {
		return err
	}
	now := r.now()
	n, err := tx.Exec(ctx, r.q.Get("DiscrepancyExecute"), d.ID, string(from), string(to), actionID, keel.ActorFrom(ctx), now, d.Generation)
	if err != nil {
		return fmt.Errorf("executing discrepancy %d: %w", d.ID, err)
	}
	if n == 0 {
		return r.refusalNow(ctx, tx, d.ID, EventExecute)
	}
	d.State, d.ActionID = to, actionID
	if err := rec.Execute(ctx, tx, d, actionID); err != nil {
		return fmt.Errorf("executing %s for discrepancy %d: %w", actionID, d.ID, err)
	}
	action := "recon.discrepancy.execute"
	if to == StateAutoHealed {
		action = "recon.discrepancy.autoheal"
	}
	return c.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: action, Target: discrepancyTarget(d.ID), Reason: reason,
		Context: map[string]any{"action_id": actionID, "impact": d.Impact, "currency": d.Currency, "suggested_action": d.SuggestedAction}})
}

// refusalNow explains a conditional UPDATE that matched nothing from the
// row as it is now.
func (r *Recon[TTx]) refusalNow(ctx context.Context, q keelsql.Querier, id int64, ev Event) error {
	d, err := r.get(ctx, q, id)
	if err != nil {
		return err
	}
	return r.refusal(d, ev)
}

func (r *Recon[TTx]) refusal(d *DiscrepancyRow, ev Event) error {
	switch {
	case ev == EventExecute && (d.State == StateExecuted || d.State == StateAutoHealed || d.State == StateVerified):
		return fmt.Errorf("discrepancy %d (%s): %w", d.ID, d.ActionID, ErrAlreadyExecuted)
	case ev == EventExecute && (d.State == StateOpen || d.State == StateAwaitingApproval) && d.NeedsApproval:
		return fmt.Errorf("discrepancy %d: %w", d.ID, ErrApprovalRequired)
	}
	return fmt.Errorf("%w: cannot %s discrepancy %d, it is %s", keeltype.ErrInvalidState, ev, d.ID, d.State)
}

func approvalTarget(d *DiscrepancyRow) string {
	return "recon:" + d.Reconciler + ":" + strconv.FormatInt(d.ID, 10)
}

func targetID(target string) (int64, error) {
	i := strings.LastIndexByte(target, ':')
	id, err := strconv.ParseInt(target[i+1:], 10, 64)
	if i < 0 || err != nil || !strings.HasPrefix(target, "recon:") {
		return 0, fmt.Errorf("%w: approval target %q is not a discrepancy", keeltype.ErrInvalidArgument, target)
	}
	return id, nil
}

// DiscrepancyFilter selects discrepancies.
type DiscrepancyFilter struct {
	Reconciler string
	State      State
	Class      Class
	Key        string
	Before     int64 // id cursor
	Limit      int
}

// ListDiscrepancies returns discrepancies, newest first.
func (r *Recon[TTx]) ListDiscrepancies(ctx context.Context, f DiscrepancyFilter) ([]*DiscrepancyRow, error) {
	if f.State != "" && !f.State.Valid() {
		return nil, fmt.Errorf("%w: unknown discrepancy state %q", keeltype.ErrInvalidArgument, f.State)
	}
	if f.Class != "" && !f.Class.Valid() {
		return nil, fmt.Errorf("%w: unknown discrepancy class %q", keeltype.ErrInvalidArgument, f.Class)
	}
	if f.Limit <= 0 || f.Limit > MaxList {
		f.Limit = MaxList
	}
	rows, err := r.db.Query(ctx, r.q.Get("DiscrepancyList"), f.Reconciler, string(f.State), string(f.Class), f.Key, f.Before, f.Limit)
	return keelsql.CollectRows(rows, err, func(rs keelsql.Rows) (*DiscrepancyRow, error) { return scanDiscrepancy(rs) })
}

// GetDiscrepancy returns one discrepancy (keeltype.ErrNotFound if none).
func (r *Recon[TTx]) GetDiscrepancy(ctx context.Context, id int64) (*DiscrepancyRow, error) {
	return r.get(ctx, r.db, id)
}

// StateCounts counts discrepancies per state.
func (r *Recon[TTx]) StateCounts(ctx context.Context) (map[State]int64, error) {
	rows, err := r.db.Query(ctx, r.q.Get("DiscrepancyStateCounts"))
	type sc struct {
		s State
		n int64
	}
	list, err := keelsql.CollectRows(rows, err, func(rs keelsql.Rows) (sc, error) {
		var v sc
		var s string
		err := rs.Scan(&s, &v.n)
		v.s = State(s)
		return v, err
	})
	out := map[State]int64{}
	for _, v := range list {
		out[v.s] = v.n
	}
	return out, err
}

func (r *Recon[TTx]) get(ctx context.Context, q keelsql.Querier, id int64) (*DiscrepancyRow, error) {
	d, err := scanDiscrepancy(q.QueryRow(ctx, r.q.Get("DiscrepancyGet"), id))
	if isNotFound(err) {
		return nil, fmt.Errorf("%w: no discrepancy %d", keeltype.ErrNotFound, id)
	}
	return d, err
}

func (r *Recon[TTx]) byKey(ctx context.Context, q keelsql.Querier, name string, class Class, key string) (*DiscrepancyRow, error) {
	d, err := scanDiscrepancy(q.QueryRow(ctx, r.q.Get("DiscrepancyByKey"), name, string(class), key))
	if err != nil {
		return nil, fmt.Errorf("reading discrepancy %s/%s: %w", class, key, err)
	}
	return d, nil
}

func scanDiscrepancy(s scanner) (*DiscrepancyRow, error) {
	var d DiscrepancyRow
	var class, state, ev string
	err := s.Scan(&d.ID, &d.Reconciler, &class, &d.Key, &state, &d.Generation, &ev, &d.SuggestedAction, &d.Impact,
		&d.Currency, &d.SafeAutoHeal, &d.NeedsApproval, &d.FirstRunID, &d.LastRunID, &d.VerifiedRunID, &d.ApprovalID,
		&d.ActionID, &d.ExecutedBy, &d.ExecutedAt, &d.CreatedAt, &d.UpdatedAt)
	if err != nil {
		return nil, err
	}
	d.Class, d.State = Class(class), State(state)
	if err := json.Unmarshal([]byte(ev), &d.Evidence); err != nil {
		return nil, fmt.Errorf("reading discrepancy %d's evidence: %w", d.ID, err)
	}
	return &d, nil
}

// RunFilter selects runs.
type RunFilter struct {
	Reconciler string
	Before     int64
	Limit      int
}

// ListRuns returns runs, newest first.
func (r *Recon[TTx]) ListRuns(ctx context.Context, f RunFilter) ([]*Run, error) {
	if f.Limit <= 0 || f.Limit > MaxList {
		f.Limit = MaxList
	}
	rows, err := r.db.Query(ctx, r.q.Get("RunList"), f.Reconciler, f.Before, f.Limit)
	return keelsql.CollectRows(rows, err, func(rs keelsql.Rows) (*Run, error) { return scanRun(rs) })
}

// GetRun returns one run (keeltype.ErrNotFound if none).
func (r *Recon[TTx]) GetRun(ctx context.Context, id int64) (*Run, error) {
	run, err := scanRun(r.db.QueryRow(ctx, r.q.Get("RunGet"), id))
	if isNotFound(err) {
		return nil, fmt.Errorf("%w: no run %d", keeltype.ErrNotFound, id)
	}
	return run, err
}

func scanRun(s scanner) (*Run, error) {
	var run Run
	var totals string
	err := s.Scan(&run.ID, &run.Reconciler, &run.RuleVersion, &run.Cutoff, &run.Trigger, &run.RequestedBy, &run.State,
		&run.StartedAt, &run.FinishedAt, &run.Compared, &run.Found, &totals, &run.Digest, &run.Applied, &run.Opened,
		&run.Healed, &run.Verified, &run.Resolved, &run.Reopened, &run.Error, &run.Instance, &run.Scope)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(totals), &run.Totals); err != nil {
		return nil, fmt.Errorf("reading run %d's totals: %w", run.ID, err)
	}
	return &run, nil
}
