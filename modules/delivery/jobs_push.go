package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
)

// Job kinds.
const (
	KindPush        = "delivery.push"
	KindRequeueItem = "delivery.requeue_item"
	KindForward     = "delivery.forward"
	KindIngest      = "delivery.ingest"
	// BatchKind is the engine batch kind of requeue tasks.
	BatchKind = "downstream.requeue"
)

// PushArgs push one record: created at ingestion and by single and page
// requeues.
type PushArgs struct {
	DeliveryID int64 `json:"delivery_id"`
	AppID      int64 `json:"app_id"`
	RecordKind Kind  `json:"kind"`
	// By names who asked: "ingest", or the operator of a requeue.
	By string `json:"by,omitempty"`
}

// Kind implements keel.JobArgs.
func (PushArgs) Kind() string { return KindPush }

// RequeueArgs are a requeue task item: the record and its state frozen at
// the task's snapshot.
type RequeueArgs struct {
	DeliveryID    int64     `json:"delivery_id"`
	AppID         int64     `json:"app_id"`
	FrozenStatus  Status    `json:"frozen_status"`
	FrozenVersion int64     `json:"frozen_version"`
	SnapshotAt    time.Time `json:"snapshot_at"`
}

// Kind implements keel.JobArgs.
func (RequeueArgs) Kind() string { return KindRequeueItem }

// errRedecide: the record moved between reading and claiming it; read it
// again and decide anew.
var errRedecide = errors.New("delivery: record moved; deciding again")

// maxDecisions bounds read-decide-claim rounds of one run.
const maxDecisions = 3

// externalRecheck is how often an item waiting for another attempt's ACK
// looks at the record again.
const externalRecheck = 5 * time.Second

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

type pushWorker[TTx any] struct{ m *Module[TTx] }

func (w *pushWorker[TTx]) Work(ctx context.Context, job *keel.Job[PushArgs]) error {
	m := w.m
	if job.Fence == 1 && !job.NeedsCheck {
		// First run: claim the pending record straight away (the claim
		// re-checks the status, payload and mapping), reading it only if
		// that fails.
		if app, ok := m.apps.get(job.Args.AppID); ok && app.Accepts(job.Args.RecordKind) {
			err := m.send(ctx, &pushReq{ref: job, appID: app.ID, from: []Status{StatusPending},
				sender: "push", inline: m.set.AckInline})
			if !errors.Is(err, errRedecide) {
				return err
			}
		}
	}
	for range maxDecisions {
		rec, err := m.readRecord(ctx, job.Args.DeliveryID)
		if err != nil {
			return err
		}
		app, _ := m.apps.get(job.Args.AppID)
		v := decidePush(rec, app, job.ID, time.Now())
		if v.kind == vSkip && rec != nil && rec.Status == StatusPending {
			m.failUnsent(ctx, rec, v.code)
		}
		err = m.act(ctx, job, v, rec, "push", m.set.AckInline)
		if !errors.Is(err, errRedecide) {
			return err
		}
	}
	return keel.JobSnooze(time.Second)
}

// Check runs after a lost lease: Work itself is safe to re-run (it reads
// the record and recognizes its own attempt by the send token).
func (w *pushWorker[TTx]) Check(ctx context.Context, job *keel.Job[PushArgs]) (keel.CheckResult, error) {
	return keel.CheckResult{Decision: keel.CheckRetry}, nil
}

func (w *pushWorker[TTx]) Timeout(job *keel.Job[PushArgs]) time.Duration { return w.m.jobTimeout() }

type requeueWorker[TTx any] struct{ m *Module[TTx] }

func (w *requeueWorker[TTx]) Work(ctx context.Context, job *keel.Job[RequeueArgs]) error {
	m := w.m
	sender := "task:" + itoa(job.BatchID)
	for range maxDecisions {
		rec, err := m.readRecord(ctx, job.Args.DeliveryID)
		if err != nil {
			return err
		}
		app, _ := m.apps.get(job.Args.AppID)
		v := decideItem(rec, app, &job.Args, job.ID, job.BatchID, time.Now())
		// A written item parks at once (waiting_ack from the write on): its
		// ACK settles it without another claim (applier.settle).
		err = m.act(ctx, job, v, rec, sender, 0)
		if !errors.Is(err, errRedecide) {
			return err
		}
	}
	return keel.JobSnooze(time.Second)
}

func (w *requeueWorker[TTx]) Check(ctx context.Context, job *keel.Job[RequeueArgs]) (keel.CheckResult, error) {
	return keel.CheckResult{Decision: keel.CheckRetry}, nil
}

func (w *requeueWorker[TTx]) Timeout(job *keel.Job[RequeueArgs]) time.Duration {
	return w.m.jobTimeout()
}

// readRecord returns nil (no error) for a record that does not exist.
func (m *Module[TTx]) readRecord(ctx context.Context, id int64) (*Record, error) {
	rec, err := m.st.record(ctx, id)
	if isNoRows(err) {
		return nil, nil
	}
	return rec, err
}

// act carries out a verdict for the job behind ref.
func (m *Module[TTx]) act(ctx context.Context, ref jobRef, v verdict, rec *Record, sender string, inline time.Duration) error {
	switch v.kind {
	case vSend:
		return m.send(ctx, &pushReq{ref: ref, rec: rec, appID: rec.AppID, from: v.from, version: v.version,
			sender: sender, inline: inline})
	case vSkip:
		return keel.JobSkip(v.code)
	case vWaitExternal:
		// Nobody wakes an item for another attempt's outcome: look again
		// every externalRecheck, and at that attempt's deadline at the latest.
		return keel.JobWait(keel.WaitExternalACK, earliest(v.deadline.Add(graceAfterDeadline), time.Now().Add(externalRecheck)))
	case vAwaitOwn:
		if rowOf(ref).NeedsCheck && m.writerGone(rec) {
			// The previous run of this job lost its lease with the DELIVER
			// out: the process that would have read the ACK is gone.
			return m.concludeLost(ctx, rec)
		}
		return keel.JobWait(keel.WaitACK, v.deadline.Add(graceAfterDeadline))
	case vTimeoutOwn:
		switch {
		case rowOf(ref).NeedsCheck || m.writerGone(rec) && rec.ConnID != httpConnID:
			return m.concludeLost(ctx, rec)
		case rec.ConnID != httpConnID:
			// The connection is live here: its ACK timer concludes the
			// attempt (ack_timeout) at the deadline it started at the write.
			return keel.JobWait(keel.WaitACK, time.Now().Add(time.Second))
		}
		return m.concludeTimeout(ctx, rec)
	case vSucceed:
		return keel.RecordResult(ctx, resultOf(rec))
	case vFail:
		return failOutcome(v.class, v.msg)
	}
	return errors.New("delivery: unknown verdict")
}

// jobRef is a claimed job (*keel.Job[PushArgs] or *keel.Job[RequeueArgs]).
type jobRef = keel.JobRef

func rowOf(ref jobRef) *keeltype.JobRow { return ref.Row() }
