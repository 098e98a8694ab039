package api

import "net/http"

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
)

// The catalogue is one map; these entries live beside their codes so the
// reconciliation surface adds them without touching the engine's list.
func init() {
	Catalogue[CodeSelfApproval] = struct {
		Status int
		Title  string
	}{http.StatusForbidden, "A requester cannot decide their own request"}
	Catalogue[CodeApprovalRequired] = struct {
		Status int
		Title  string
	}{http.StatusConflict, "A second operator's approval is required"}
	Catalogue[CodeAlreadyExecuted] = struct {
		Status int
		Title  string
	}{http.StatusConflict, "The action was executed already"}
	Catalogue[CodeReplayFailed] = struct {
		Status int
		Title  string
	}{http.StatusConflict, "The replayed handler failed again"}
}
