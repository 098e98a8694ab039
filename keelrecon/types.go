package keelrecon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
)

// Class says how two sources disagree.
type Class string

// The classes of discrepancy.
const (
	MissingOurs    Class = "missing_ours"    // the counterpart has it, we do not
	MissingTheirs  Class = "missing_theirs"  // we have it, the counterpart does not
	Duplicate      Class = "duplicate"       // recorded more than once
	AmountMismatch Class = "amount_mismatch" // amounts or currencies differ
	StatusMismatch Class = "status_mismatch" // states differ
	Other          Class = "other"
)

// Classes lists every class, in display order.
var Classes = []Class{MissingOurs, MissingTheirs, Duplicate, AmountMismatch, StatusMismatch, Other}

// Valid reports whether c is a known class.
func (c Class) Valid() bool {
	for _, k := range Classes {
		if c == k {
			return true
		}
	}
	return false
}

// State is where a discrepancy is in its lifecycle.
type State string

// The discrepancy states.
const (
	StateOpen             State = "open"
	StateAutoHealed       State = "auto_healed"
	StateAwaitingApproval State = "awaiting_approval"
	StateApproved         State = "approved"
	StateExecuted         State = "executed"
	StateVerified         State = "verified"
	StateRejected         State = "rejected"
	StateResolved         State = "resolved"
)

// States lists every state, in lifecycle order.
var States = []State{StateOpen, StateAwaitingApproval, StateApproved, StateExecuted, StateAutoHealed,
	StateVerified, StateRejected, StateResolved}

// Valid reports whether s is a known state.
func (s State) Valid() bool {
	for _, k := range States {
		if s == k {
			return true
		}
	}
	return false
}

// Errors of the operator actions. Each wraps a keeltype sentinel, so a
// caller that does not know them still maps them to the right class.
var (
	// ErrSelfApproval: the requester tried to approve or reject their own
	// request. Nothing changed.
	ErrSelfApproval = fmt.Errorf("%w: the requester cannot decide their own request", keeltype.ErrInvalidState)
	// ErrApprovalRequired: the action needs a second operator's approval
	// before it is executed. Nothing changed.
	ErrApprovalRequired = fmt.Errorf("%w: this action needs a second operator's approval", keeltype.ErrInvalidState)
	// ErrAlreadyExecuted: the action was executed already (by another
	// operator or a concurrent retry); it was not executed again.
	ErrAlreadyExecuted = fmt.Errorf("%w: the action was executed already", keeltype.ErrInvalidState)
	// ErrUnknownReconciler: no reconciler of that name is registered.
	ErrUnknownReconciler = fmt.Errorf("%w: no such reconciler", keeltype.ErrNotFound)
)

// Discrepancy is what a reconciler reports for one key.
type Discrepancy struct {
	Class Class
	// Key identifies the compared item (an order, a payment, a SKU):
	// printable UTF-8, 1..200 bytes.
	Key string
	// Evidence is a snapshot of each source ("ours", "channel", "ledger"):
	// a JSON object per source, shown side by side field by field.
	Evidence map[string]json.RawMessage
	// SuggestedAction says in words what Execute will do ("补记支付成功").
	// It may end with what Execute needs of it, which the console does
	// not show: the action's code in parentheses and a fingerprint of the
	// evidence in brackets ("金额不符: 人工核实 (adjudge) [3f2a…]").
	SuggestedAction string
	// Impact is the action's amount in minor units, with its currency
	// (ISO 4217, three capital letters; empty when Impact is 0).
	Impact   int64
	Currency string
	// SafeAutoHeal lets the run execute the action by itself, when it needs
	// no approval either.
	SafeAutoHeal bool
	// NeedsApproval forces a second operator whatever the amount (an action
	// of a kind that always needs one).
	NeedsApproval bool
}

// RunInput is what a reconciler compares: everything up to Cutoff.
type RunInput struct {
	RunID       int64
	Reconciler  string
	RuleVersion string
	Cutoff      time.Time
}

// RunOutput is a run's result. Without a Scope, Discrepancies must be the
// complete set at the cutoff: one the run does not report is taken as gone.
type RunOutput struct {
	Compared      int64
	Discrepancies []Discrepancy
	// Scope makes the run partial (an intraday incremental run over what
	// changed, say): only discrepancies within it that the run does not
	// report are taken as gone; the others keep their state for a run
	// whose scope holds them. nil: the run was complete.
	Scope *Scope
}

// Scope is what a partial run compared.
type Scope struct {
	// Name says in words what the run covered ("2026-12-01 的变更与未结差异"):
	// recorded with the run and shown with it, 1..200 bytes.
	Name string
	// Covers reports whether the run compared the item behind a stored
	// discrepancy of this reconciler that it did not report, i.e. whether
	// that discrepancy is gone. It is called while the run's result is
	// applied, inside that transaction: it must not use the database (read
	// what it needs during Run).
	Covers func(class Class, key string) bool
}

// Reconciler compares sources and fixes what it is asked to fix.
type Reconciler[TTx any] interface {
	// Name is stable: [a-z0-9_.-]{1,64}.
	Name() string
	// RuleVersion names the rules; a run records it.
	RuleVersion() string
	// Schedule is when the leader runs it (nil: on demand only).
	Schedule() keel.Schedule
	// Run compares the sources as of in.Cutoff. It must depend only on its
	// input and the data up to the cutoff, so that a rerun gives the same
	// result.
	Run(ctx context.Context, in RunInput) (RunOutput, error)
	// Execute performs d's suggested action inside tx, the transaction that
	// marks it executed. actionID is stable for the discrepancy's
	// generation: pass it to the counterpart as the idempotency key.
	Execute(ctx context.Context, tx keelsql.Tx[TTx], d *DiscrepancyRow, actionID string) error
}

// Run is a recorded run.
type Run struct {
	ID          int64      `json:"id"`
	Reconciler  string     `json:"reconciler"`
	RuleVersion string     `json:"rule_version"`
	Cutoff      time.Time  `json:"cutoff"`
	Trigger     string     `json:"trigger"`
	RequestedBy string     `json:"requested_by"`
	State       string     `json:"state"`
	StartedAt   time.Time  `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	Compared    int64      `json:"compared"`
	Found       int64      `json:"found"`
	Totals      Totals     `json:"totals"`
	Digest      string     `json:"digest"`
	Applied     bool       `json:"applied"`
	Opened      int64      `json:"opened"`
	Healed      int64      `json:"healed"`
	Verified    int64      `json:"verified"`
	Resolved    int64      `json:"resolved"`
	Reopened    int64      `json:"reopened"`
	Error       string     `json:"error,omitempty"`
	Instance    string     `json:"instance"`
	// Scope names what a partial run compared (RunOutput.Scope); empty for
	// a complete run.
	Scope string `json:"scope,omitempty"`
}

// Totals are a run's discrepancies by class: how many, and their impact per
// currency (minor units).
type Totals map[Class]ClassTotal

// ClassTotal is one class's count and amounts.
type ClassTotal struct {
	Count   int64            `json:"count"`
	Amounts map[string]int64 `json:"amounts,omitempty"`
}

// DiscrepancyRow is a stored discrepancy.
type DiscrepancyRow struct {
	ID              int64                      `json:"id"`
	Reconciler      string                     `json:"reconciler"`
	Class           Class                      `json:"class"`
	Key             string                     `json:"key"`
	State           State                      `json:"state"`
	Generation      int                        `json:"generation"`
	Evidence        map[string]json.RawMessage `json:"evidence"`
	SuggestedAction string                     `json:"suggested_action"`
	Impact          int64                      `json:"impact"`
	Currency        string                     `json:"currency"`
	SafeAutoHeal    bool                       `json:"safe_auto_heal"`
	NeedsApproval   bool                       `json:"needs_approval"`
	FirstRunID      int64                      `json:"first_run_id"`
	LastRunID       int64                      `json:"last_run_id"`
	VerifiedRunID   *int64                     `json:"verified_run_id,omitempty"`
	ApprovalID      *int64                     `json:"approval_id,omitempty"`
	ActionID        string                     `json:"action_id,omitempty"`
	ExecutedBy      string                     `json:"executed_by,omitempty"`
	ExecutedAt      *time.Time                 `json:"executed_at,omitempty"`
	CreatedAt       time.Time                  `json:"created_at"`
	UpdatedAt       time.Time                  `json:"updated_at"`
}

// ActionIDFor is the stable action id of a discrepancy's generation.
func ActionIDFor(id int64, generation int) string {
	return fmt.Sprintf("recon/%d/%d", id, generation)
}

// isNotFound reports keelsql's no-rows.
func isNotFound(err error) bool { return errors.Is(err, keelsql.ErrNoRows) }
