package delivery

import "time"

// Skip reasons of requeue items: the item did not call the gateway, because
// the record moved on after the task was created, another task or channel
// delivered it, or its data cannot be pushed. They are the codes passed to
// keel.JobSkip.
const (
	SkipStateChanged     = "state_changed"            // 执行前状态已变化
	SkipConfirmedLater   = "confirmed_after_creation" // 创建任务后才被客户确认
	SkipOtherTask        = "other_task"               // 已被其他任务处理
	SkipAlreadySucceeded = "already_succeeded"        // 本任务已成功处理
	SkipNotInSnapshot    = "not_in_snapshot"          // 不属于任务快照
	SkipAppDisabled      = "app_disabled"             // 应用或投递能力已停用
	SkipIncompleteData   = "incomplete_data"          // 投递数据不完整
	SkipNoSubmitMapping  = "no_submit_mapping"        // 缺少原 Submit 映射
	SkipHandledElsewhere = "handled_elsewhere"        // (push jobs) another attempt owns the record
	SkipAlreadyDelivered = "already_delivered"        // (push jobs) nothing left to push
)

// SkipReasons lists the skip codes in display order.
var SkipReasons = []string{SkipStateChanged, SkipConfirmedLater, SkipOtherTask, SkipAlreadySucceeded,
	SkipNotInSnapshot, SkipAppDisabled, SkipIncompleteData, SkipNoSubmitMapping, SkipHandledElsewhere,
	SkipAlreadyDelivered}

type verdictKind int

const (
	vSend         verdictKind = iota + 1 // claim from From at Version and push
	vSkip                                // end skipped with Code; nothing sent
	vWaitExternal                        // another attempt is awaiting its ACK: wait for it
	vAwaitOwn                            // this job's attempt is awaiting its ACK
	vTimeoutOwn                          // this job's attempt passed its deadline: conclude unconfirmed
	vSucceed                             // this job's attempt was acknowledged
	vFail                                // this job's attempt failed (Class, Msg)
)

type verdict struct {
	kind     verdictKind
	code     string
	from     []Status
	version  int64
	deadline time.Time
	class    string
	msg      string
}

// ownVerdict decides for a record whose current or last attempt is this
// job's (same send token); ok=false when the job has no attempt to answer
// for (the attempt was reverted, or none was made).
func ownVerdict(r *Record, at time.Time) (verdict, bool) {
	if r.ConnID == "" {
		// Reverted (RecordRevert clears the connection): nothing was
		// written, the record is back in its previous status.
		return verdict{}, false
	}
	switch r.Status {
	case StatusAwaitingACK:
		if r.AckDeadline != nil && !at.Before(*r.AckDeadline) {
			return verdict{kind: vTimeoutOwn}, true
		}
		return verdict{kind: vAwaitOwn, deadline: deadlineOf(r, at)}, true
	case StatusDelivered:
		return verdict{kind: vSucceed}, true
	case StatusRejected, StatusUnconfirmed, StatusFailed:
		return verdict{kind: vFail, class: r.LastErrorClass, msg: r.LastError}, true
	}
	return verdict{}, false
}

func deadlineOf(r *Record, at time.Time) time.Time {
	if r.AckDeadline == nil {
		return at.Add(DefaultAckTimeout)
	}
	return *r.AckDeadline
}

// sendable checks what every push needs besides the status: the
// application takes the kind, the payload is there, a report still has
// its Submit mapping.
func sendable(r *Record, app *Application) (string, bool) {
	switch {
	case app == nil || !app.Accepts(r.Kind):
		return SkipAppDisabled, false
	case !r.Kind.Valid() || len(r.Payload) == 0 || string(r.Payload) == "null":
		return SkipIncompleteData, false
	case r.Kind == KindReport && r.SubmitID == nil:
		return SkipNoSubmitMapping, false
	}
	return "", true
}

// decideItem is a requeue item's verdict, taken from the record as read
// right before acting (never from what the task saw at its creation): the
// application (nil when gone), the item's frozen state, and the job and
// task it runs as decide whether it pushes, waits or skips.
func decideItem(r *Record, app *Application, args *RequeueArgs, jobID, batchID int64, at time.Time) verdict {
	if r == nil {
		return verdict{kind: vSkip, code: SkipIncompleteData}
	}
	if r.CreatedAt.After(args.SnapshotAt) {
		return verdict{kind: vSkip, code: SkipNotInSnapshot}
	}
	if r.SendToken == tokenOf(jobID) {
		if v, ok := ownVerdict(r, at); ok {
			return v
		}
	}
	switch {
	case r.Status == StatusAwaitingACK:
		return verdict{kind: vWaitExternal, deadline: deadlineOf(r, at)}
	case r.Status == StatusDelivered:
		if v, done := deliveredVerdict(r, args, batchID); done {
			return v
		}
	case !r.Status.Requeueable():
		return verdict{kind: vSkip, code: SkipStateChanged}
	}
	if code, ok := sendable(r, app); !ok {
		return verdict{kind: vSkip, code: code}
	}
	return verdict{kind: vSend, from: []Status{r.Status}, version: r.Version}
}

// deliveredVerdict: a delivered record is re-sent only when the item froze
// it delivered and nobody touched it since (the operator's explicit
// re-delivery); otherwise its confirmation came after the task was created
// and the item is skipped, naming who completed it.
func deliveredVerdict(r *Record, args *RequeueArgs, batchID int64) (verdict, bool) {
	if args.FrozenStatus == StatusDelivered && r.Version == args.FrozenVersion {
		return verdict{}, false
	}
	switch {
	case batchID != 0 && r.SendBatchID == batchID:
		return verdict{kind: vSkip, code: SkipAlreadySucceeded}, true
	case r.SendBatchID != 0:
		return verdict{kind: vSkip, code: SkipOtherTask}, true
	}
	return verdict{kind: vSkip, code: SkipConfirmedLater}, true
}

// decidePush is a push job's verdict. A push job sends a pending record
// once; when the record is anything else, another attempt owns it and the
// job ends without calling the gateway.
func decidePush(r *Record, app *Application, jobID int64, at time.Time) verdict {
	if r == nil {
		return verdict{kind: vSkip, code: SkipIncompleteData}
	}
	if r.SendToken == tokenOf(jobID) {
		if v, ok := ownVerdict(r, at); ok {
			return v
		}
	}
	switch r.Status {
	case StatusPending:
	case StatusDelivered:
		return verdict{kind: vSkip, code: SkipAlreadyDelivered}
	default:
		return verdict{kind: vSkip, code: SkipHandledElsewhere}
	}
	if code, ok := sendable(r, app); !ok {
		return verdict{kind: vSkip, code: code}
	}
	return verdict{kind: vSend, from: []Status{StatusPending}, version: r.Version}
}
