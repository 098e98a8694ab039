package keelrecon

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsql/sqlfile"
	"github.com/keelwork/keel/keeltype"
)

// ApprovalState is where an approval request is.
type ApprovalState string

// The approval states: pending → approved → executed, pending → rejected,
// pending | approved → cancelled (what it was for is gone).
const (
	ApprovalPending   ApprovalState = "pending"
	ApprovalApproved  ApprovalState = "approved"
	ApprovalRejected  ApprovalState = "rejected"
	ApprovalExecuted  ApprovalState = "executed"
	ApprovalCancelled ApprovalState = "cancelled"
)

// ApprovalStates lists every approval state.
var ApprovalStates = []ApprovalState{ApprovalPending, ApprovalApproved, ApprovalRejected, ApprovalExecuted, ApprovalCancelled}

// Valid reports whether s is a known approval state.
func (s ApprovalState) Valid() bool {
	for _, k := range ApprovalStates {
		if s == k {
			return true
		}
	}
	return false
}

// Approval is one request for a second operator's decision.
type Approval struct {
	ID             int64         `json:"id"`
	Kind           string        `json:"kind"`
	Target         string        `json:"target"`
	ActionID       string        `json:"action_id"`
	Summary        string        `json:"summary"`
	Amount         int64         `json:"amount"`
	Currency       string        `json:"currency"`
	State          ApprovalState `json:"state"`
	RequestedBy    string        `json:"requested_by"`
	RequestReason  string        `json:"request_reason"`
	RequestedAt    time.Time     `json:"requested_at"`
	DecidedBy      string        `json:"decided_by,omitempty"`
	DecisionReason string        `json:"decision_reason,omitempty"`
	DecidedAt      *time.Time    `json:"decided_at,omitempty"`
	ExecutedBy     string        `json:"executed_by,omitempty"`
	ExecutedAt     *time.Time    `json:"executed_at,omitempty"`
}

// Kind is a kind of action that needs approval, registered by the module
// that executes it.
type Kind[TTx any] struct {
	// Name is stable: [a-z0-9_.-]{1,64} ("recon.action", "inventory.adjust").
	Name string
	// ZH and EN name the kind for the console.
	ZH, EN string
	// Decided, if set, runs in the decision's transaction (approved or
	// rejected), so the module's own record moves with the approval.
	Decided func(ctx context.Context, tx keelsql.Tx[TTx], a *Approval) error
	// Execute, if set, performs the approved action in the transaction that
	// marks the approval executed (Approvals.Execute). Without it the module
	// executes by itself and calls MarkExecutedTx in its transaction.
	Execute func(ctx context.Context, tx keelsql.Tx[TTx], a *Approval) error
}

// Request asks for approval of one action.
type Request struct {
	Kind   string
	Target string // what it acts on ("recon:payments:42", "sku:A-100")
	// ActionID is the action's stable id: a second request with the same
	// kind and action id returns the first one.
	ActionID string
	Summary  string // the action in words
	Amount   int64  // minor units
	Currency string
	Reason   string
}

// ApprovalFilter selects approvals for List.
type ApprovalFilter struct {
	State ApprovalState
	Kind  string
	// NotRequestedBy leaves out the actor's own requests (what awaits them).
	NotRequestedBy string
	Before         int64 // id cursor
	Limit          int
}

// MaxList bounds a list's page.
const MaxList = 500

var nameRE = regexp.MustCompile(`^[a-z0-9_.-]{1,64}$`)
var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// Approvals is the four-eyes capability: requests, decisions by a second
// operator, and execution once.
type Approvals[TTx any] struct {
	db     keelsql.DB[TTx]
	q      sqlfile.Set
	client func() *keel.Client[TTx]
	now    func() time.Time

	mu    sync.RWMutex
	kinds map[string]Kind[TTx]
}

// RegisterKind declares a kind of action; requests of unknown kinds are
// refused.
func (a *Approvals[TTx]) RegisterKind(k Kind[TTx]) error {
	if !nameRE.MatchString(k.Name) {
		return fmt.Errorf("keelrecon: approval kind %q: want [a-z0-9_.-]{1,64}", k.Name)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, dup := a.kinds[k.Name]; dup {
		return fmt.Errorf("keelrecon: approval kind %q registered twice", k.Name)
	}
	a.kinds[k.Name] = k
	return nil
}

// KindOf returns a registered kind.
func (a *Approvals[TTx]) KindOf(name string) (Kind[TTx], bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	k, ok := a.kinds[name]
	return k, ok
}

func (a *Approvals[TTx]) checkRequest(r *Request) error {
	if _, ok := a.KindOf(r.Kind); !ok {
		return fmt.Errorf("%w: no approval kind %q", keeltype.ErrInvalidArgument, r.Kind)
	}
	if err := checkText("target", r.Target, 200); err != nil {
		return err
	}
	if err := checkText("action id", r.ActionID, 200); err != nil {
		return err
	}
	if r.Summary != "" {
		if err := checkText("summary", r.Summary, 500); err != nil {
			return err
		}
	}
	if r.Currency != "" && !currencyRE.MatchString(r.Currency) {
		return fmt.Errorf("%w: currency %q is not an ISO 4217 code", keeltype.ErrInvalidArgument, r.Currency)
	}
	if r.Amount != 0 && r.Currency == "" {
		return fmt.Errorf("%w: an amount needs its currency", keeltype.ErrInvalidArgument)
	}
	reason, err := CheckReason(r.Reason)
	r.Reason = reason
	return err
}

// checkText refuses empty, over-long, non-UTF-8 or control-character text.
func checkText(what, s string, max int) error {
	if s == "" || len(s) > max || !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s must be 1..%d bytes of UTF-8", keeltype.ErrInvalidArgument, what, max)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: %s holds a control character", keeltype.ErrInvalidArgument, what)
		}
	}
	return nil
}

func (a *Approvals[TTx]) engine() (*keel.Client[TTx], error) {
	if c := a.client(); c != nil {
		return c, nil
	}
	return nil, errNotStarted
}

// Request asks for approval in its own transaction.
func (a *Approvals[TTx]) Request(ctx context.Context, r Request) (*Approval, error) {
	var out *Approval
	err := a.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		var err error
		out, err = a.RequestTx(ctx, tx, r)
		return err
	})
	return out, err
}

// RequestTx asks for approval in the caller's transaction, audited in it;
// the requester is keel.ActorFrom(ctx). A repeat of a request (same kind
// and action id) returns the stored one.
func (a *Approvals[TTx]) RequestTx(ctx context.Context, tx keelsql.Tx[TTx], r Request) (*Approval, error) {
	if err := a.checkRequest(&r); err != nil {
		return nil, err
	}
	c, err := a.engine()
	if err != nil {
		return nil, err
	}
	actor := keel.ActorFrom(ctx)
	var id int64
	err = tx.QueryRow(ctx, a.q.Get("ApprovalInsert"), r.Kind, r.Target, r.ActionID, r.Summary, r.Amount, r.Currency,
		actor, r.Reason, a.now()).Scan(&id)
	if isNotFound(err) {
		return a.byAction(ctx, tx, r.Kind, r.ActionID)
	}
	if err != nil {
		return nil, fmt.Errorf("requesting approval: %w", err)
	}
	ap, err := a.get(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	return ap, c.AuditRecordTx(ctx, tx.Native(), approvalAudit("approval.request", ap, r.Reason))
}

func approvalAudit(action string, ap *Approval, reason string) keel.Audit {
	return keel.Audit{Action: action, Target: "approval:" + strconv.FormatInt(ap.ID, 10), Reason: reason,
		Context: map[string]any{"kind": ap.Kind, "target": ap.Target, "action_id": ap.ActionID, "amount": ap.Amount,
			"currency": ap.Currency, "requested_by": ap.RequestedBy, "state": ap.State}}
}

// Approve records a second operator's approval. The actor
// (keel.ActorFrom(ctx)) must not be the requester: ErrSelfApproval.
func (a *Approvals[TTx]) Approve(ctx context.Context, id int64, reason string) (*Approval, error) {
	return a.decide(ctx, id, ApprovalApproved, reason)
}

// Reject records a second operator's rejection (not the requester's).
func (a *Approvals[TTx]) Reject(ctx context.Context, id int64, reason string) (*Approval, error) {
	return a.decide(ctx, id, ApprovalRejected, reason)
}

func (a *Approvals[TTx]) decide(ctx context.Context, id int64, to ApprovalState, reason string) (*Approval, error) {
	reason, err := CheckReason(reason)
	if err != nil {
		return nil, err
	}
	var out *Approval
	err = a.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		out, err = a.DecideTx(ctx, tx, id, to, reason)
		return err
	})
	return out, err
}

// DecideTx approves or rejects in the caller's transaction: one
// conditional UPDATE (pending, and not the requester), the kind's Decided
// hook and the audit entry.
func (a *Approvals[TTx]) DecideTx(ctx context.Context, tx keelsql.Tx[TTx], id int64, to ApprovalState, reason string) (*Approval, error) {
	if to != ApprovalApproved && to != ApprovalRejected {
		return nil, fmt.Errorf("%w: a decision approves or rejects", keeltype.ErrInvalidArgument)
	}
	reason, err := CheckReason(reason)
	if err != nil {
		return nil, err
	}
	c, err := a.engine()
	if err != nil {
		return nil, err
	}
	actor := keel.ActorFrom(ctx)
	n, err := tx.Exec(ctx, a.q.Get("ApprovalDecide"), id, string(to), actor, reason, a.now())
	if err != nil {
		return nil, fmt.Errorf("deciding approval %d: %w", id, err)
	}
	if n == 0 {
		return nil, a.refusal(ctx, tx, id, actor, "decide")
	}
	ap, err := a.get(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if k, ok := a.KindOf(ap.Kind); ok && k.Decided != nil {
		if err := k.Decided(ctx, tx, ap); err != nil {
			return nil, err
		}
	}
	action := "approval.approve"
	if to == ApprovalRejected {
		action = "approval.reject"
	}
	return ap, c.AuditRecordTx(ctx, tx.Native(), approvalAudit(action, ap, reason))
}

// refusal explains why a conditional UPDATE on approval id matched nothing.
func (a *Approvals[TTx]) refusal(ctx context.Context, q keelsql.Querier, id int64, actor, verb string) error {
	ap, err := a.get(ctx, q, id)
	if err != nil {
		return err
	}
	switch {
	case ap.State == ApprovalPending && ap.RequestedBy == actor && verb == "decide":
		return fmt.Errorf("approval %d was requested by %s: %w", id, actor, ErrSelfApproval)
	case ap.State == ApprovalExecuted:
		return fmt.Errorf("approval %d by %s: %w", id, ap.ExecutedBy, ErrAlreadyExecuted)
	case ap.State == ApprovalPending && verb == "execute":
		return fmt.Errorf("approval %d is not decided yet: %w", id, ErrApprovalRequired)
	}
	return fmt.Errorf("%w: cannot %s approval %d, it is %s", keeltype.ErrInvalidState, verb, id, ap.State)
}

// Execute performs an approved action once: the approval moves to executed
// and the kind's Execute runs in the same transaction, audited. A second
// or concurrent call gets ErrAlreadyExecuted and executes nothing.
func (a *Approvals[TTx]) Execute(ctx context.Context, id int64, reason string) (*Approval, error) {
	reason, err := CheckReason(reason)
	if err != nil {
		return nil, err
	}
	var out *Approval
	err = a.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		ap, err := a.get(ctx, tx, id)
		if err != nil {
			return err
		}
		k, ok := a.KindOf(ap.Kind)
		if !ok || k.Execute == nil {
			return fmt.Errorf("%w: approvals of kind %q are executed by their module", keeltype.ErrInvalidState, ap.Kind)
		}
		if out, err = a.MarkExecutedTx(ctx, tx, id, reason); err != nil {
			return err
		}
		return k.Execute(ctx, tx, out)
	})
	return out, err
}

// MarkExecutedTx moves an approved request to executed in the caller's
// transaction (one conditional UPDATE), audited; the caller performs the
// action in the same transaction only when it returns no error, which is
// what makes the action happen once.
func (a *Approvals[TTx]) MarkExecutedTx(ctx context.Context, tx keelsql.Tx[TTx], id int64, reason string) (*Approval, error) {
	c, err := a.engine()
	if err != nil {
		return nil, err
	}
	actor := keel.ActorFrom(ctx)
	n, err := tx.Exec(ctx, a.q.Get("ApprovalExecute"), id, actor, a.now())
	if err != nil {
		return nil, fmt.Errorf("executing approval %d: %w", id, err)
	}
	if n == 0 {
		return nil, a.refusal(ctx, tx, id, actor, "execute")
	}
	ap, err := a.get(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	return ap, c.AuditRecordTx(ctx, tx.Native(), approvalAudit("approval.execute", ap, reason))
}

// CancelTx withdraws a pending or approved request whose purpose is gone,
// audited; an already final one is left as it is.
func (a *Approvals[TTx]) CancelTx(ctx context.Context, tx keelsql.Tx[TTx], id int64, reason string) error {
	c, err := a.engine()
	if err != nil {
		return err
	}
	n, err := tx.Exec(ctx, a.q.Get("ApprovalCancel"), id, a.now())
	if err != nil || n == 0 {
		return err
	}
	ap, err := a.get(ctx, tx, id)
	if err != nil {
		return err
	}
	return c.AuditRecordTx(ctx, tx.Native(), approvalAudit("approval.cancel", ap, reason))
}

// Get returns one approval (keeltype.ErrNotFound if none).
func (a *Approvals[TTx]) Get(ctx context.Context, id int64) (*Approval, error) {
	return a.get(ctx, a.db, id)
}

// List returns approvals, newest first.
func (a *Approvals[TTx]) List(ctx context.Context, f ApprovalFilter) ([]*Approval, error) {
	if f.State != "" && !f.State.Valid() {
		return nil, fmt.Errorf("%w: unknown approval state %q", keeltype.ErrInvalidArgument, f.State)
	}
	if f.Limit <= 0 || f.Limit > MaxList {
		f.Limit = MaxList
	}
	rows, err := a.db.Query(ctx, a.q.Get("ApprovalList"), string(f.State), f.Kind, f.NotRequestedBy, f.Before, f.Limit)
	return keelsql.CollectRows(rows, err, func(rs keelsql.Rows) (*Approval, error) { return scanApproval(rs) })
}

// Awaiting lists the pending requests actor may decide: everyone's but
// their own.
func (a *Approvals[TTx]) Awaiting(ctx context.Context, actor string, limit int) ([]*Approval, error) {
	return a.List(ctx, ApprovalFilter{State: ApprovalPending, NotRequestedBy: actor, Limit: limit})
}

func (a *Approvals[TTx]) get(ctx context.Context, q keelsql.Querier, id int64) (*Approval, error) {
	ap, err := scanApproval(q.QueryRow(ctx, a.q.Get("ApprovalGet"), id))
	if isNotFound(err) {
		return nil, fmt.Errorf("%w: no approval %d", keeltype.ErrNotFound, id)
	}
	return ap, err
}

func (a *Approvals[TTx]) byAction(ctx context.Context, q keelsql.Querier, kind, actionID string) (*Approval, error) {
	ap, err := scanApproval(q.QueryRow(ctx, a.q.Get("ApprovalByAction"), kind, actionID))
	if isNotFound(err) {
		return nil, fmt.Errorf("%w: no approval of kind %s for action %s", keeltype.ErrNotFound, kind, actionID)
	}
	return ap, err
}

type scanner interface{ Scan(dest ...any) error }

func scanApproval(s scanner) (*Approval, error) {
	var ap Approval
	var state string
	err := s.Scan(&ap.ID, &ap.Kind, &ap.Target, &ap.ActionID, &ap.Summary, &ap.Amount, &ap.Currency, &state,
		&ap.RequestedBy, &ap.RequestReason, &ap.RequestedAt, &ap.DecidedBy, &ap.DecisionReason, &ap.DecidedAt,
		&ap.ExecutedBy, &ap.ExecutedAt)
	if err != nil {
		return nil, err
	}
	ap.State = ApprovalState(state)
	return &ap, nil
}

var errNotStarted = errors.New("keelrecon: not started (Start gives it the engine client that audits)")
