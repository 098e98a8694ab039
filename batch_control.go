package keel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// BatchGet returns a batch with its counters.
func (c *Client[TTx]) BatchGet(ctx context.Context, id int64) (*keeltype.BatchRow, error) {
	return c.driver.Executor().BatchGet(ctx, id)
}

// BatchList pages batches newest first; pass the last id of a page as
// BeforeID for the next. Every batch ever created is reachable.
func (c *Client[TTx]) BatchList(ctx context.Context, params *BatchListParams) ([]*keeltype.BatchRow, error) {
	return c.driver.Executor().BatchList(ctx, params.driverParams())
}

// BatchItems pages a batch's items in subject order; pass the last subject
// of a page as AfterSubject for the next.
func (c *Client[TTx]) BatchItems(ctx context.Context, params *BatchItemsParams) ([]*keeltype.JobRow, error) {
	return c.driver.Executor().BatchItems(ctx, params.driverParams())
}

// BatchOutcomeOf is the outcome bucket of one item (the same mapping the
// counters use).
func BatchOutcomeOf(row *keeltype.JobRow) keeltype.BatchOutcome {
	switch row.State {
	case keeltype.JobStateRunning, keeltype.JobStateUnknown:
		return keeltype.OutcomeProcessing
	case keeltype.JobStateWaiting:
		switch row.WaitReason {
		case WaitConnection:
			return keeltype.OutcomeWaitingConnection
		case WaitExternalACK:
			return keeltype.OutcomeWaitingExternalACK
		case WaitACK:
			return keeltype.OutcomeWaitingACK
		}
		return keeltype.OutcomeWaiting
	case keeltype.JobStateCompleted:
		return keeltype.OutcomeSuccess
	case keeltype.JobStateFailed, keeltype.JobStateManual:
		return keeltype.OutcomeFailed
	case keeltype.JobStateSkipped:
		return keeltype.OutcomeSkipped
	case keeltype.JobStateCancelled:
		var r struct{ Reason string }
		if json.Unmarshal(row.Result, &r) == nil && r.Reason == batchTerminatedReason {
			return keeltype.OutcomeUnprocessed
		}
		return keeltype.OutcomeFailed
	}
	return keeltype.OutcomeQueued
}

// BatchProgress is a batch's progress for dashboards.
type BatchProgress struct {
	Done  int64 // items in a final bucket
	Total int64
	// Rate is items finished per second since the batch started.
	Rate float64
	// ETA is the remaining time at Rate (0 when unknown or done).
	ETA time.Duration
}

// ProgressOf computes done/total, rate and ETA of b at now.
func ProgressOf(b *keeltype.BatchRow, now time.Time) BatchProgress {
	p := BatchProgress{Total: b.Total}
	for o, n := range b.Counts {
		if !o.Live() {
			p.Done += n
		}
	}
	if b.StartedAt != nil {
		end := now
		if b.CompletedAt != nil {
			end = *b.CompletedAt
		}
		if el := end.Sub(*b.StartedAt).Seconds(); el > 0 {
			p.Rate = float64(p.Done) / el
		}
	}
	if p.Rate > 0 && p.Done < p.Total && b.CompletedAt == nil {
		p.ETA = time.Duration(float64(p.Total-p.Done) / p.Rate * float64(time.Second))
	}
	return p
}

// BatchPause pauses a queued or running batch: no item of it is claimed
// from the next claim on, and items already running learn it at their
// BatchCheck. Audited.
func (c *Client[TTx]) BatchPause(ctx context.Context, id int64, reason string) (*keeltype.BatchRow, error) {
	pctx, _ := json.Marshal(map[string]any{"by": ActorFrom(ctx), "reason": reason})
	return c.batchTransition(ctx, "batch.pause", reason, &keeldriver.BatchTransitionParams{ID: id, Action: "pause",
		From: []keeltype.BatchState{keeltype.BatchQueued, keeltype.BatchRunning}, To: keeltype.BatchPaused,
		PauseReason: "manual", PauseContext: pctx}, nil)
}

// BatchResume resumes a paused batch: it becomes queued and, once fully
// materialized, running again; items continue from where they stood
// (nothing that succeeded is repeated). A batch that a key's auto-pause
// paused also gets its paused keys resumed (each audited). Audited.
func (c *Client[TTx]) BatchResume(ctx context.Context, id int64, reason string) (*keeltype.BatchRow, error) {
	prev, err := c.BatchGet(ctx, id)
	if err != nil {
		return nil, err
	}
	auto := prev.PauseReason == "auto"
	b, err := c.batchTransition(ctx, "batch.resume", reason, &keeldriver.BatchTransitionParams{ID: id, Action: "resume",
		From: []keeltype.BatchState{keeltype.BatchPaused}, To: keeltype.BatchQueued}, nil)
	if err != nil {
		return nil, err
	}
	if auto {
		if _, err := c.BatchKeysResumeAll(ctx, id, reason); err != nil {
			return nil, fmt.Errorf("resuming the keys of batch %d: %w", id, err)
		}
	}
	if err := c.BatchTick(ctx); err != nil {
		c.logger.Warn("starting resumed batch", "batch", id, "error", err)
	}
	return c.BatchGet(ctx, b.ID)
}

// BatchTerminate ends a batch: in the same transaction every item never
// claimed becomes unprocessed (one statement). Items ever claimed are not
// recalled: they finish, and their workers' BatchCheck before a new side
// effect ends them unprocessed. Audited, with the count.
func (c *Client[TTx]) BatchTerminate(ctx context.Context, id int64, reason string) (*keeltype.BatchRow, error) {
	var n int
	return c.batchTransition(ctx, "batch.terminate", reason, &keeldriver.BatchTransitionParams{ID: id, Action: "terminate",
		From: []keeltype.BatchState{keeltype.BatchQueued, keeltype.BatchRunning, keeltype.BatchPaused},
		To:   keeltype.BatchTerminated}, func(ex keeldriver.Executor, a *Audit) error {
		var err error
		n, err = ex.BatchTerminateItems(ctx, id, nil)
		a.Context["unprocessed"] = n
		return err
	})
}

func (c *Client[TTx]) batchTransition(ctx context.Context, action, reason string, p *keeldriver.BatchTransitionParams, also func(keeldriver.Executor, *Audit) error) (*keeltype.BatchRow, error) {
	if strings.TrimSpace(reason) == "" {
		return nil, fmt.Errorf("%w: %s needs a reason", keeltype.ErrInvalidArgument, action)
	}
	var out *keeltype.BatchRow
	a := Audit{Action: action, Target: batchTarget(p.ID), Reason: reason, Context: map[string]any{}}
	if err := a.check(); err != nil {
		return nil, err
	}
	tx, err := c.driver.Executor().Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if out, err = tx.BatchTransition(ctx, p); err != nil {
		return nil, err
	}
	if also != nil {
		if err := also(tx, &a); err != nil {
			return nil, err
		}
	}
	a.Context["from"], a.Context["to"], a.Context["kind"] = p.From, p.To, out.Kind
	a.Context["counts"], a.Context["total"] = out.Counts, out.Total
	if _, err := tx.AuditInsert(ctx, auditRow(ctx, a)); err != nil {
		return nil, fmt.Errorf("auditing %s: %w", action, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("committing %s: %w", action, err)
	}
	return c.BatchGet(ctx, p.ID)
}

// BatchKeys lists the flow key states of a batch (which keys are paused,
// why, their consecutive failures), in key order; After pages.
func (c *Client[TTx]) BatchKeys(ctx context.Context, id int64, after string, limit int) ([]*keeltype.FlowKeyRow, error) {
	if limit <= 0 {
		limit = 100
	}
	return flowExec(c.driver.Executor()).FlowKeyList(ctx, &keeldriver.FlowKeyListParams{
		Prefix: BatchKeyPrefix(id), After: after, Limit: limit})
}

// BatchKeyResume resumes one auto-paused (or paused) key of a batch; key is
// the module's key ("app:42"), not the batch-scoped one. Audited as
// batch.key_resume.
func (c *Client[TTx]) BatchKeyResume(ctx context.Context, id int64, key, reason string) (*keeltype.FlowKeyRow, error) {
	full := BatchKeyPrefix(id) + key
	a := Audit{Action: "batch.key_resume", Reason: reason, Context: map[string]any{"batch_id": id, "key": key}}
	return c.changeKey(ctx, full, a, func(k *keeltype.FlowKeyRow, now time.Time) error {
		if k.PausedAt == nil {
			return fmt.Errorf("%w: key %q of batch %d is not paused", keeltype.ErrInvalidState, key, id)
		}
		a.Context["pause_reason"], a.Context["pause_context"] = k.PauseReason, k.PauseContext
		k.PausedAt, k.PausedBy, k.PauseReason, k.PauseContext = nil, "", "", []byte(`{}`)
		k.ConsecutiveFailures, k.RampStartedAt = 0, ptr(now)
		return nil
	})
}

// BatchKeysResumeAll resumes every paused key of a batch; returns the keys.
func (c *Client[TTx]) BatchKeysResumeAll(ctx context.Context, id int64, reason string) ([]string, error) {
	var resumed []string
	after := ""
	prefix := BatchKeyPrefix(id)
	for {
		rows, err := flowExec(c.driver.Executor()).FlowKeyList(ctx, &keeldriver.FlowKeyListParams{
			Prefix: prefix, After: after, OnlyPaused: true, Limit: 500})
		if err != nil {
			return resumed, err
		}
		for _, r := range rows {
			key := strings.TrimPrefix(r.Key, prefix)
			if _, err := c.BatchKeyResume(ctx, id, key, reason); err != nil {
				return resumed, err
			}
			resumed = append(resumed, key)
		}
		if len(rows) < 500 {
			return resumed, nil
		}
		after = rows[len(rows)-1].Key
	}
}

// BatchTick starts batches that are queued and fully materialized, finishes
// running batches whose items all ended (completed, or partial_completed
// when any failed) and compacts counters. The leader runs it; calling it
// more often is harmless (each step is a conditional update).
func (c *Client[TTx]) BatchTick(ctx context.Context) error {
	ex := c.driver.Executor()
	// A read first: with no batch to start or finish, no write transaction
	// (SQLite has one writer; the leader ticks often).
	active, err := ex.BatchList(ctx, &keeldriver.BatchListParams{
		States: []keeltype.BatchState{keeltype.BatchQueued, keeltype.BatchRunning}, Limit: 1})
	if err != nil || len(active) == 0 {
		return err
	}
	started, err := ex.BatchStartReady(ctx, nil)
	if err != nil {
		return err
	}
	queues := map[string]bool{}
	for _, id := range started {
		if b, err := ex.BatchGet(ctx, id); err == nil {
			queues[b.Queue] = true
		}
	}
	for q := range queues {
		_ = c.driver.Notify(ctx, topicInsert, q)
	}
	done, err := ex.BatchFinishDone(ctx, nil)
	if err != nil {
		return err
	}
	var ids []int64
	for _, b := range done {
		ids = append(ids, b.ID)
		c.logger.Info("batch finished", "batch", b.ID, "state", b.State, "total", b.Total,
			"success", b.Counts[keeltype.OutcomeSuccess], "failed", b.Counts[keeltype.OutcomeFailed])
		if err := flowExec(ex).FlowLimitDelete(ctx, BatchKeyPrefix(b.ID)+"*", ""); err != nil {
			c.logger.Warn("removing batch flow limit", "batch", b.ID, "error", err)
		}
	}
	if len(done) > 0 {
		c.flowChanged(ctx, "limits")
	}
	return ex.BatchCompact(ctx, ids)
}

// BatchDrift is a reconciliation's finding: per bucket, the counter and the
// recount from items (only buckets that differ).
type BatchDrift struct {
	BatchID int64
	Counter map[keeltype.BatchOutcome]int64
	Items   map[keeltype.BatchOutcome]int64
}

// None reports whether counters matched the items.
func (d *BatchDrift) None() bool { return len(d.Counter) == 0 }

// BatchReconcile recomputes a batch's counters from its items and reports
// any drift (there should be none: triggers count every transition). With
// repair, the drift is corrected and audited. The counters and the recount
// are read in one transaction, so they see the same items.
func (c *Client[TTx]) BatchReconcile(ctx context.Context, id int64, repair bool) (*BatchDrift, error) {
	tx, err := c.driver.Executor().Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.BatchLockForItems(ctx, id); err != nil {
		return nil, err
	}
	b, err := tx.BatchGet(ctx, id)
	if err != nil {
		return nil, err
	}
	items, err := tx.BatchRecount(ctx, id)
	if err != nil {
		return nil, err
	}
	d := &BatchDrift{BatchID: id, Counter: map[keeltype.BatchOutcome]int64{}, Items: map[keeltype.BatchOutcome]int64{}}
	deltas := map[keeltype.BatchOutcome]int64{}
	for _, o := range keeltype.AllBatchOutcomes {
		if b.Counts[o] != items[o] {
			d.Counter[o], d.Items[o] = b.Counts[o], items[o]
			deltas[o] = items[o] - b.Counts[o]
		}
	}
	if d.None() {
		return d, nil
	}
	c.logger.Error("batch counters drifted from items", "batch", id, "counters", d.Counter, "items", d.Items)
	if !repair {
		return d, nil
	}
	if err := tx.BatchCountAdjust(ctx, id, deltas); err != nil {
		return nil, err
	}
	a := Audit{Action: "batch.reconcile", Target: batchTarget(id), Reason: "counters drifted from items",
		Context: map[string]any{"counters": d.Counter, "items": d.Items, ReasonCodeKey: ReasonCountersDrifted}}
	if _, err := tx.AuditInsert(ctx, auditRow(WithActor(ctx, "system:reconciler"), a)); err != nil {
		return nil, err
	}
	return d, tx.Commit(ctx)
}

// batchKeyPaused runs in the transaction that auto-paused a batch key: it
// records the batch's last error, audits batch.autopause with the trigger
// (key, failure class, count, threshold) and, for batches that pause as a
// whole, pauses the batch with reason "auto".
func (c *Client[TTx]) batchKeyPaused(ctx context.Context, ex keeldriver.Executor, p *autoPause) error {
	id, ok := batchOfKey(p.key)
	if !ok {
		return nil
	}
	b, err := ex.BatchGet(ctx, id)
	if err != nil {
		return nil // not a batch of ours (a user key named like one)
	}
	key := strings.TrimPrefix(p.key, BatchKeyPrefix(id))
	trigger := map[string]any{}
	for k, v := range p.context {
		trigger[k] = v
	}
	trigger["key"], trigger["flow_key"], trigger["batch_id"] = key, p.key, id
	msg := fmt.Sprintf("key %s auto-paused: %v", key, p.context["last_error"])
	if err := ex.BatchSetLastError(ctx, id, msg); err != nil {
		return err
	}
	sys := WithActor(ctx, "system:autopause")
	whole := b.PauseOnKeyPause && (b.State == keeltype.BatchRunning || b.State == keeltype.BatchQueued)
	trigger["batch_paused"] = whole
	trigger[ReasonCodeKey] = ReasonKeyAutoPaused
	if whole {
		raw, _ := json.Marshal(trigger)
		if _, err := ex.BatchTransition(ctx, &keeldriver.BatchTransitionParams{ID: id, Action: "auto-pause",
			From: []keeltype.BatchState{keeltype.BatchQueued, keeltype.BatchRunning}, To: keeltype.BatchPaused,
			PauseReason: "auto", PauseContext: raw}); err != nil {
			return err
		}
	}
	a := Audit{Action: "batch.autopause", Target: batchTarget(id), Reason: msg, Context: trigger}
	_, err = ex.AuditInsert(sys, auditRow(sys, a))
	return err
}

// batches is the leader's batch step: start, finish, compact.
func (m *maintenance[TTx]) batches(ctx context.Context) {
	if err := m.c.BatchTick(ctx); err != nil {
		m.warn(ctx, "advancing batches", err)
	}
}

// reconcileBatches recomputes the counters of every unfinished batch from
// its items and reports drift (there should be none: triggers keep the
// counters in the items' own transactions). Convergence is proven by this
// recount, not assumed from an empty queue.
func (m *maintenance[TTx]) reconcileBatches(ctx context.Context) {
	var before int64
	for ctx.Err() == nil {
		batches, err := m.c.BatchList(ctx, &BatchListParams{BeforeID: before, Limit: 100,
			States: []keeltype.BatchState{keeltype.BatchQueued, keeltype.BatchRunning, keeltype.BatchPaused}})
		if err != nil {
			m.warn(ctx, "listing batches to reconcile", err)
			return
		}
		for _, b := range batches {
			drift, err := m.c.BatchReconcile(ctx, b.ID, false)
			if err == nil && !drift.None() {
				m.c.metrics.BatchDrift.Inc()
				m.c.logger.Error("batch counters drifted from their items", "batch_id", b.ID,
					"counters", drift.Counter, "items", drift.Items)
			}
			before = b.ID
		}
		if len(batches) < 100 {
			return
		}
	}
}
