package api

import (
	"net/http"

	"github.com/keelwork/keel/module/web"
)

// Problem codes of reconciliation and four-eyes approvals (package
// keelrecon, served by keelevents/eventsweb).
const (
	// CodeSelfApproval: the requester tried to decide their own request.
	CodeSelfApproval Code = "self_approval"
	// CodeApprovalRequired: the action needs a second operator's approval
	// before it is executed.
	CodeApprovalRequired Code = "approval_required"
	// CodeAlreadyExecuted: the action was executed already; it was not
	// executed again.
	CodeAlreadyExecuted Code = "already_executed"
	// CodeReplayFailed: a manual event's handler failed again on replay;
	// it stays manual with the new error recorded.
	CodeReplayFailed Code = "replay_failed"
	// CodeConsumerNotRegistered: a manual event's consumer does not run in
	// the serving process, so it cannot be replayed there; it stays manual.
	CodeConsumerNotRegistered Code = "consumer_not_registered"
)

// These entries live beside their codes so the reconciliation surface adds
// them without touching the engine's list.
func init() {
	web.Register(string(CodeSelfApproval), http.StatusForbidden, "A requester cannot decide their own request")
	web.Register(string(CodeApprovalRequired), http.StatusConflict, "A second operator's approval is required")
	web.Register(string(CodeAlreadyExecuted), http.StatusConflict, "The action was executed already")
	web.Register(string(CodeReplayFailed), http.StatusConflict, "The replayed handler failed again")
	web.Register(string(CodeConsumerNotRegistered), http.StatusConflict, "The event's consumer does not run here")
}
