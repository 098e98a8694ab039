package delivery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
)

// Requeue settings the operator chooses: the speed of a task (pushes per
// second per application), the consecutive failures after which it pauses
// an application, and at most 50 records requeued from one page's selection.
const (
	DefaultTaskRate      = keel.DefaultBatchRate      // pushes per second per application
	DefaultTaskAutoPause = keel.DefaultBatchAutoPause // consecutive failures that pause an application
	MaxTaskRate          = 1000
	MaxPageSelection     = 50
	minReasonRunes       = keel.MinBatchReasonRunes
)

// TaskRates are the speeds the console offers.
var TaskRates = []float64{1, 5, 10, 20, 50}

// TaskPreview is what an operator sees before creating a task: the counts
// under the filter at the snapshot instant, and the token that binds the
// creation to exactly this filter and snapshot (a changed filter or an old
// preview is refused).
type TaskPreview struct {
	Filter      Filter           `json:"filter"`
	SnapshotAt  time.Time        `json:"snapshot_at"`
	Hits        int64            `json:"hits"`
	Eligible    int64            `json:"eligible"`
	RuleSkipped int64            `json:"rule_skipped"`
	ByStatus    map[string]int64 `json:"by_status"`
	Apps        int64            `json:"apps"`
	Earliest    *time.Time       `json:"earliest,omitempty"`
	// Delivered is how many eligible records the customer already
	// confirmed: requeueing them may make the customer process them twice.
	Delivered       int64      `json:"delivered"`
	AllowedStatuses []Status   `json:"allowed_statuses"`
	Refused         string     `json:"refused,omitempty"`
	Token           string     `json:"token,omitempty"`
	ExpiresAt       *time.Time `json:"expires_at,omitempty"`
}

// ErrAwaitingRefused: a task was asked for records awaiting their ACK.
var ErrAwaitingRefused = module.Errorf(http.StatusUnprocessableEntity, "awaiting_ack_refused",
	"records awaiting their ACK cannot be requeued (status awaiting_ack)")

// PreviewTask counts the filter now and signs a token for CreateTask. A
// filter on awaiting_ack is counted but gets no token.
func (m *Module[TTx]) PreviewTask(ctx context.Context, f Filter) (*TaskPreview, error) {
	if err := f.Validate(); err != nil {
		return nil, module.Invalid("%v", err)
	}
	src := source[TTx]{m}
	var pv *keel.BatchPreview
	var err error
	out := &TaskPreview{Filter: f, AllowedStatuses: RequeueStatuses}
	if f.Status == StatusAwaitingACK {
		out.SnapshotAt = now()
		pv, err = src.Preview(ctx, f, out.SnapshotAt)
		out.Refused = "awaiting_ack"
	} else {
		pv, err = keel.BatchPreviewOf(ctx, m.client.Load(), src, f)
	}
	if err != nil {
		return nil, err
	}
	if pv.Token != "" {
		out.SnapshotAt, out.Token = pv.SnapshotAt, pv.Token
		e := pv.ExpiresAt
		out.ExpiresAt = &e
	}
	out.Hits, out.Eligible, out.RuleSkipped, out.ByStatus = pv.Hits, pv.Eligible, pv.RuleSkipped, pv.ByState
	out.Apps, out.Earliest, out.Delivered = pv.DistinctKeys, pv.Earliest, pv.ByState[string(StatusDelivered)]
	return out, nil
}

// CreateTaskRequest creates a task from a preview token; the scope comes
// from the token, never from the request.
type CreateTaskRequest struct {
	Token  string `json:"token"`
	Reason string `json:"reason"`
	// Rate is pushes per second per application (default 10).
	Rate float64 `json:"rate,omitempty"`
	// AutoPause is the consecutive failures (immediate, ACK rejected, ACK
	// timeout) that pause one application of the task (default 10).
	AutoPause int `json:"auto_pause,omitempty"`
	// PauseWholeTask makes an application's auto-pause pause the whole
	// task (default: only that application stops).
	PauseWholeTask bool   `json:"pause_whole_task,omitempty"`
	Name           string `json:"name,omitempty"`
}

func (r *CreateTaskRequest) validate() error {
	r.Reason = strings.TrimSpace(r.Reason)
	switch {
	case r.Token == "":
		return module.Invalid("token is required: preview the filter first")
	case utf8.RuneCountInString(r.Reason) < minReasonRunes:
		return module.Invalid("reason must be at least %d characters (incident, ticket or explanation)", minReasonRunes)
	case r.Rate < 0 || r.Rate > MaxTaskRate:
		return module.Invalid("rate must be between 0 and %d per second", MaxTaskRate)
	case r.AutoPause < 0 || r.AutoPause > 1000:
		return module.Invalid("auto_pause must be between 1 and 1000")
	}
	if r.Rate == 0 {
		r.Rate = DefaultTaskRate
	}
	if r.AutoPause == 0 {
		r.AutoPause = DefaultTaskAutoPause
	}
	return nil
}

// CreateTask creates a requeue task: the batch, its per-application rate
// and auto-pause, and its audit entry commit together; its items are
// materialized from the token's filter and snapshot. A token creates at
// most one task: posting it again returns the first task (CreateTaskOnce
// tells which happened).
func (m *Module[TTx]) CreateTask(ctx context.Context, r CreateTaskRequest) (*keeltype.BatchRow, error) {
	b, _, err := m.CreateTaskOnce(ctx, r)
	return b, err
}

// ErrPreviewInUse: another request is creating the task of this preview
// right now and did not finish within taskClaimWait.
var ErrPreviewInUse = module.Errorf(http.StatusConflict, "preview_in_use",
	"a task is being created from this preview; look for it in the task list")

// taskClaimWait bounds how long a second post of a token waits for the
// first post's task (its items are materialized before it is known).
const taskClaimWait = 30 * time.Second

// CreateTaskOnce is CreateTask, with created=false when the token had
// already created a task (which is returned). The token's SHA-256 is
// claimed by a primary key before the task is created, so two posts of
// one token — at once or one after the other, on any instance — make one
// task: the loser of the insert waits for the winner's task.
func (m *Module[TTx]) CreateTaskOnce(ctx context.Context, r CreateTaskRequest) (*keeltype.BatchRow, bool, error) {
	if err := r.validate(); err != nil {
		return nil, false, err
	}
	c := m.client.Load()
	if err := keel.BatchTokenVerify(ctx, c, BatchKind, r.Token); err != nil {
		return nil, false, tokenProblem(err)
	}
	digest := tokenDigest(r.Token)
	won, err := m.st.claimTaskToken(ctx, digest, keel.ActorFrom(ctx))
	if err != nil {
		return nil, false, err
	}
	if !won {
		b, err := m.taskOfToken(ctx, digest)
		return b, false, err
	}
	b, err := keel.BatchCreate(ctx, c, source[TTx]{m}, r.Token, keel.BatchOpts{
		Name: r.Name, Reason: r.Reason, Queue: QueueName, Rate: engineTaskRate(r.Rate), AutoPauseFailures: r.AutoPause,
		PauseOnKeyPause: r.PauseWholeTask,
	})
	if err != nil {
		if refusedBeforeCreating(err) {
			// Nothing was created: the token may be used again.
			_ = m.st.releaseTaskToken(context.WithoutCancel(ctx), digest)
		}
		// Otherwise a batch may exist (materialization failed midway): the
		// claim stays, so the token cannot make a second one.
		return nil, false, tokenProblem(err)
	}
	if err := m.st.setTaskToken(context.WithoutCancel(ctx), digest, b.ID); err != nil {
		return nil, false, err
	}
	m.noteTask(b.ID)
	return b, true, nil
}

func refusedBeforeCreating(err error) bool {
	return errors.Is(err, keeltype.ErrBatchToken) || errors.Is(err, keeltype.ErrBatchTokenExpired) ||
		errors.Is(err, keeltype.ErrBatchTokenOperator) || errors.Is(err, keeltype.ErrInvalidArgument)
}

// taskOfToken waits for the task the token's first post creates.
func (m *Module[TTx]) taskOfToken(ctx context.Context, digest string) (*keeltype.BatchRow, error) {
	deadline := time.Now().Add(taskClaimWait)
	for {
		id, found, err := m.st.taskOfToken(ctx, digest)
		switch {
		case err != nil:
			return nil, err
		case id != 0:
			return m.task(ctx, id)
		case !found:
			// The first post was refused and gave the token back.
			return nil, module.Errorf(http.StatusConflict, "preview_in_use",
				"the first use of this preview failed; post it again")
		case time.Now().After(deadline):
			return nil, ErrPreviewInUse
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func tokenDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func tokenProblem(err error) error {
	switch {
	case errors.Is(err, keeltype.ErrBatchTokenExpired):
		return module.Errorf(http.StatusConflict, "preview_expired", "the preview expired; preview again")
	case errors.Is(err, keeltype.ErrBatchTokenOperator):
		return module.Errorf(http.StatusForbidden, "preview_of_other_operator", "the preview was made by another operator")
	case errors.Is(err, keeltype.ErrBatchToken):
		return module.Errorf(http.StatusBadRequest, "invalid_preview_token", "the preview token does not verify")
	}
	return err
}

// task reads a batch and checks it is a requeue task.
func (m *Module[TTx]) task(ctx context.Context, id int64) (*keeltype.BatchRow, error) {
	b, err := m.client.Load().BatchGet(ctx, id)
	if err != nil {
		return nil, err
	}
	if b.Kind != BatchKind {
		return nil, fmt.Errorf("task %d: %w", id, keeltype.ErrNotFound)
	}
	return b, nil
}

// PauseTask, ResumeTask and TerminateTask are the operator's controls;
// the engine audits each with the actor of ctx.
func (m *Module[TTx]) PauseTask(ctx context.Context, id int64, reason string) (*keeltype.BatchRow, error) {
	return m.control(ctx, id, reason, m.client.Load().BatchPause)
}

// ResumeTask resumes a paused task, or the auto-paused applications of a
// running one.
func (m *Module[TTx]) ResumeTask(ctx context.Context, id int64, reason string) (*keeltype.BatchRow, error) {
	c := m.client.Load()
	b, err := m.task(ctx, id)
	if err != nil {
		return nil, err
	}
	if b.State == keeltype.BatchRunning || b.State == keeltype.BatchQueued {
		if err := checkReason(reason); err != nil {
			return nil, err
		}
		keys, err := c.BatchKeysResumeAll(ctx, id, reason)
		if err != nil {
			return nil, err
		}
		if len(keys) == 0 {
			return nil, &keeltype.BatchStateError{BatchID: id, Action: "resume", State: b.State}
		}
		return c.BatchGet(ctx, id)
	}
	b, err = m.control(ctx, id, reason, c.BatchResume)
	if err == nil {
		m.noteTask(id)
	}
	return b, err
}

// TerminateTask ends a task; items already sent finish on their own.
// Items an auto-paused application held back (handed back before writing)
// would stay queued behind the paused key for good, so its keys resume
// with the termination's reason: those items run once more only to end
// unprocessed at their check before the gateway.
func (m *Module[TTx]) TerminateTask(ctx context.Context, id int64, reason string) (*keeltype.BatchRow, error) {
	c := m.client.Load()
	b, err := m.control(ctx, id, reason, c.BatchTerminate)
	if err != nil {
		return nil, err
	}
	if _, err := c.BatchKeysResumeAll(ctx, id, strings.TrimSpace(reason)); err != nil {
		return b, fmt.Errorf("task %d terminated; resuming its paused applications so their held items end: %w", id, err)
	}
	return b, nil
}

func (m *Module[TTx]) control(ctx context.Context, id int64, reason string, f func(context.Context, int64, string) (*keeltype.BatchRow, error)) (*keeltype.BatchRow, error) {
	if err := checkReason(reason); err != nil {
		return nil, err
	}
	if _, err := m.task(ctx, id); err != nil {
		return nil, err
	}
	return f(ctx, id, strings.TrimSpace(reason))
}

func checkReason(reason string) error {
	if utf8.RuneCountInString(strings.TrimSpace(reason)) < minReasonRunes {
		return module.Invalid("reason must be at least %d characters", minReasonRunes)
	}
	return nil
}

// RequeueResult is one record's answer to a single or page requeue.
type RequeueResult struct {
	ID       int64  `json:"id"`
	Requeued bool   `json:"requeued"`
	JobID    int64  `json:"job_id,omitempty"`
	Refused  string `json:"refused,omitempty"` // awaiting_ack, moved, not_found
}

// Requeue puts records back to pending and queues a push for each, one
// transaction per record (the record's move, its push job and the audit
// entry). versions[i], when given, is the version the operator saw; a
// record that moved since is refused as "moved".
func (m *Module[TTx]) Requeue(ctx context.Context, ids []int64, versions []int64, reason, mode string) ([]RequeueResult, error) {
	if err := checkReason(reason); err != nil {
		return nil, err
	}
	if len(ids) == 0 || len(ids) > MaxPageSelection {
		return nil, module.Invalid("select 1 to %d records", MaxPageSelection)
	}
	recs, err := m.st.recordsByIDs(ctx, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[int64]*Record, len(recs))
	for _, r := range recs {
		byID[r.ID] = r
	}
	out := make([]RequeueResult, len(ids))
	for i, id := range ids {
		var v int64
		if i < len(versions) {
			v = versions[i]
		}
		if out[i], err = m.requeueOne(ctx, byID[id], id, v, strings.TrimSpace(reason), mode, len(ids)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (m *Module[TTx]) requeueOne(ctx context.Context, r *Record, id, version int64, reason, mode string, n int) (RequeueResult, error) {
	res := RequeueResult{ID: id}
	switch {
	case r == nil:
		res.Refused = "not_found"
		return res, nil
	case r.Status == StatusAwaitingACK:
		res.Refused = "awaiting_ack"
		return res, nil
	case version != 0 && version != r.Version:
		res.Refused = "moved"
		return res, nil
	}
	actor := keel.ActorFrom(ctx)
	c := m.client.Load()
	err := m.st.db.InTx(ctx, func(tx txOf[TTx]) error {
		ok, err := m.st.requeueRecord(ctx, tx, r.ID, r.Version, actor, reason)
		if err != nil || !ok {
			res.Refused = "moved"
			return err
		}
		job, err := c.InsertTx(ctx, tx.Native(), PushArgs{DeliveryID: r.ID, AppID: r.AppID, RecordKind: r.Kind, By: actor},
			&keel.InsertOpts{Queue: QueueName, FlowKey: appKey(r.AppID),
				IdempotencyKey: fmt.Sprintf("requeue:%d:%d", r.ID, r.Version)})
		if err != nil {
			return err
		}
		res.Requeued, res.JobID = true, job.Job.ID
		return c.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "delivery.requeue", Target: "delivery:" + itoa(r.ID),
			Reason: reason, Context: map[string]any{"mode": mode, "from_status": r.Status, "version": r.Version,
				"app_id": r.AppID, "msg_id": r.MsgID, "job_id": job.Job.ID, "selected": n}})
	})
	if err != nil {
		return RequeueResult{}, fmt.Errorf("requeueing record %d: %w", id, err)
	}
	return res, nil
}
