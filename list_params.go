package keel

import (
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// The parameters of the Client's list and wake methods are the engine's own
// types: keeldriver is the seam between the engine and its drivers and may
// change with them, so nothing a user writes should have to name it. Each
// type is turned into the driver's parameters by one function below; a field
// added here is added there and nowhere else.

// JobListParams filters and pages jobs in id order. Cursor paging: AfterID
// (ascending) or BeforeID (descending, newest first when Desc). Empty
// filters match everything; Limit 0 lets the driver choose its default.
type JobListParams struct {
	States   []keeltype.JobState
	Kinds    []string
	Queues   []string
	FlowKey  string
	BatchID  int64
	AfterID  int64 // ascending pages: id > AfterID
	BeforeID int64 // descending pages: id < BeforeID (0 = from the newest)
	Desc     bool
	Limit    int
}

func (p *JobListParams) driverParams() *keeldriver.JobListParams {
	if p == nil {
		return &keeldriver.JobListParams{}
	}
	return &keeldriver.JobListParams{States: p.States, Kinds: p.Kinds, Queues: p.Queues, FlowKey: p.FlowKey,
		BatchID: p.BatchID, AfterID: p.AfterID, BeforeID: p.BeforeID, Desc: p.Desc, Limit: p.Limit}
}

// JobWakeParams names the waiting jobs to wake: by IDs, or by FlowKey (and
// WaitReason if set). With IDs, a set FlowKey or WaitReason narrows them: a
// job named but waiting under another key or reason stays waiting (a
// receipt wakes only the jobs still waiting for receipts). They become
// available with their wait reason cleared.
type JobWakeParams struct {
	IDs        []int64
	FlowKey    string
	WaitReason string
}

func (p *JobWakeParams) driverParams() *keeldriver.JobWakeParams {
	if p == nil {
		return &keeldriver.JobWakeParams{}
	}
	return &keeldriver.JobWakeParams{IDs: p.IDs, FlowKey: p.FlowKey, WaitReason: p.WaitReason}
}

// AuditListParams filters and pages the audit log, newest first.
type AuditListParams struct {
	Actor    string
	Action   string // prefix match: "queue." lists every queue action
	Target   string
	Since    *time.Time
	Until    *time.Time
	BeforeID int64 // 0 = from the newest
	Limit    int
}

func (p *AuditListParams) driverParams() *keeldriver.AuditListParams {
	if p == nil {
		return &keeldriver.AuditListParams{}
	}
	return &keeldriver.AuditListParams{Actor: p.Actor, Action: p.Action, Target: p.Target,
		Since: p.Since, Until: p.Until, BeforeID: p.BeforeID, Limit: p.Limit}
}

// BatchListParams pages batches newest first.
type BatchListParams struct {
	States   []keeltype.BatchState
	Kind     string
	BeforeID int64 // 0 = from the newest
	Limit    int
}

func (p *BatchListParams) driverParams() *keeldriver.BatchListParams {
	if p == nil {
		return &keeldriver.BatchListParams{}
	}
	return &keeldriver.BatchListParams{States: p.States, Kind: p.Kind, BeforeID: p.BeforeID, Limit: p.Limit}
}

// BatchItemsParams filters and pages a batch's items in subject order:
// AfterSubject is the cursor (the last subject of the previous page).
// Outcome, Subject (exact) and Text (substring of the wait reason, result or
// error history) filter.
type BatchItemsParams struct {
	BatchID      int64
	AfterSubject string
	Outcome      keeltype.BatchOutcome
	Subject      string
	Text         string
	Limit        int
}

func (p *BatchItemsParams) driverParams() *keeldriver.BatchItemsParams {
	if p == nil {
		return &keeldriver.BatchItemsParams{}
	}
	return &keeldriver.BatchItemsParams{BatchID: p.BatchID, AfterSubject: p.AfterSubject, Outcome: p.Outcome,
		Subject: p.Subject, Text: p.Text, Limit: p.Limit}
}

// FlowKeyListParams pages persisted flow-key states in key order.
type FlowKeyListParams struct {
	Prefix      string
	After       string // cursor: the last key of the previous page
	OnlyPaused  bool
	OnlyTripped bool // breaker not closed
	// HideFinishedBatches leaves out the keys of batches that ended: a
	// bulk task leaves one key per application behind, which lists need
	// not show once it is over (the batch's own page still lists them).
	HideFinishedBatches bool
	Limit               int
}

func (p *FlowKeyListParams) driverParams() *keeldriver.FlowKeyListParams {
	if p == nil {
		return &keeldriver.FlowKeyListParams{}
	}
	return &keeldriver.FlowKeyListParams{Prefix: p.Prefix, After: p.After, OnlyPaused: p.OnlyPaused,
		OnlyTripped: p.OnlyTripped, HideFinishedBatches: p.HideFinishedBatches, Limit: p.Limit}
}
