package delivery

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/modules/delivery/cmpp"
)

// pushReq is one push attempt to make.
type pushReq struct {
	ref     jobRef
	rec     *Record // as read; nil on a push job's first run
	appID   int64
	from    []Status
	version int64 // 0: any
	sender  string
	inline  time.Duration // how long the job keeps its slot for a quick outcome
}

const (
	// windowWait bounds how long a push waits for a free window slot
	// before it hands the job back (no failure) for a later claim.
	windowWait = 10 * time.Second
	busySnooze = time.Second
	// elsewhereSnooze hands back a job whose application is connected to
	// another instance (which is the one to claim it).
	elsewhereSnooze = 250 * time.Millisecond
	// retrySnooze hands back a job whose connection closed before its
	// DELIVER was written.
	retrySnooze = 100 * time.Millisecond
)

// send makes one attempt: a window slot (CMPP), the rate's spacing, the
// batch check, the claim of the record, the write, and the wait for the
// outcome. It returns the job's outcome.
func (m *Module[TTx]) send(ctx context.Context, r *pushReq) error {
	app, ok := m.apps.get(r.appID)
	if !ok {
		return keel.JobSkip(SkipAppDisabled)
	}
	if app.Protocol.CMPP() {
		return m.sendCMPP(ctx, r, app)
	}
	return m.sendHTTP(ctx, r, app)
}

func (m *Module[TTx]) sendCMPP(ctx context.Context, r *pushReq, app *Application) error {
	l, release, err := m.links.reserve(ctx, app.ID, windowWait)
	switch {
	case errors.Is(err, errNoLink):
		// A terminated task's item ends now rather than after waiting for
		// a connection; a paused one is handed back.
		if err := keel.BatchCheck(ctx, r.ref); err != nil {
			return err
		}
		return m.noLink(app)
	case errors.Is(err, errLinksBusy):
		return keel.JobSnooze(busySnooze)
	case err != nil:
		return err
	}
	att, rec, err := m.begin(ctx, r, l.ID(), strconv.FormatUint(uint64(l.NewMsgID()), 10))
	if err != nil {
		release()
		return err
	}
	att.release = release
	if err := m.write(ctx, l, app, att, rec); err != nil {
		return err
	}
	return m.await(ctx, r, att, rec, r.inline)
}

// begin paces, checks the batch and claims the record.
func (m *Module[TTx]) begin(ctx context.Context, r *pushReq, connID, outer string) (*attempt, *Record, error) {
	row := rowOf(r.ref)
	var claimed time.Time
	if row.AttemptedAt != nil {
		claimed = *row.AttemptedAt
	}
	rate := m.keyRate(ctx, row.FlowKey)
	if err := keel.BatchCheck(ctx, r.ref); err != nil {
		return nil, nil, err
	}
	token := tokenOf(row.ID)
	rec, err := m.claims.claim(ctx, &claim{
		ID: m.recordIDOf(r), From: r.from, Version: r.version, Sender: r.sender, Token: token, JobID: row.ID,
		BatchID: row.BatchID, ConnID: connID, OuterID: outer, Deadline: now().Add(m.ackTimeout(connID)),
	})
	if isNoRows(err) {
		return nil, nil, errRedecide
	}
	if err != nil {
		return nil, nil, fmt.Errorf("claiming record: %w", err)
	}
	if row.BatchID != 0 {
		if err := m.lastCheck(ctx, r.ref, rec, token); err != nil {
			return nil, nil, err
		}
	}
	// Pacing comes after the claim and the checks, right before the write:
	// whatever time those round trips took (they vary with the database's
	// load) is spent before the write's slot, not between the slot and the
	// write, where it would bunch writes at the customer. A write that had
	// to wait for its slot checks again, so the write still follows a check
	// by nothing but itself.
	slept, err := m.pace.wait(ctx, row.FlowKey, rate, claimed)
	if err != nil {
		if _, rerr := m.st.revert(context.WithoutCancel(ctx), rec.ID, token, "not written: "+err.Error()); rerr != nil {
			return nil, nil, rerr
		}
		return nil, nil, err
	}
	if slept && row.BatchID != 0 {
		if err := m.lastCheck(ctx, r.ref, rec, token); err != nil {
			return nil, nil, err
		}
	}
	// The check above read the database after the slot; when a previous
	// write of the key was held up like that, this one may now be less
	// than an interval behind it: wait out the rest, and check again.
	for d := m.pace.turn(row.FlowKey, rate); d > 0; d = m.pace.turn(row.FlowKey, rate) {
		if err := sleepCtx(ctx, d); err != nil {
			if _, rerr := m.st.revert(context.WithoutCancel(ctx), rec.ID, token, "not written: "+err.Error()); rerr != nil {
				return nil, nil, rerr
			}
			return nil, nil, err
		}
		if row.BatchID != 0 {
			if err := m.lastCheck(ctx, r.ref, rec, token); err != nil {
				return nil, nil, err
			}
		}
	}
	a := newAttempt(rec.ID, token, row.ID)
	a.connID, a.batch, a.key = connID, row.BatchID != 0, row.FlowKey
	a.outer, _ = strconv.ParseUint(rec.DeliverMsgID, 10, 64)
	return a, rec, nil
}

// lastCheck is a task item's check right before its write, after the
// record is claimed: every outcome of the application known here is
// counted first (the gate), then the task's and the application's pause
// are read; an outcome that arrived during that read sends it round again.
// So the write follows the check by nothing but the write itself, and no
// failure known before the write can have paused the application unseen.
// A refusal undoes the record's claim: nothing was written.
func (m *Module[TTx]) lastCheck(ctx context.Context, ref jobRef, rec *Record, token string) error {
	key := rowOf(ref).FlowKey
	for range 20 {
		gen, err := m.acks.gate.wait(ctx, key, gateWait)
		if err == nil {
			err = keel.BatchCheck(ctx, ref)
		}
		if err != nil {
			if _, rerr := m.st.revert(context.WithoutCancel(ctx), rec.ID, token, "not written: "+err.Error()); rerr != nil {
				return rerr
			}
			return err
		}
		if !m.acks.gate.changed(key, gen) {
			return nil
		}
	}
	return nil
}

func (m *Module[TTx]) recordIDOf(r *pushReq) int64 {
	if r.rec != nil {
		return r.rec.ID
	}
	switch a := r.ref.(type) {
	case *keel.Job[PushArgs]:
		return a.Args.DeliveryID
	case *keel.Job[RequeueArgs]:
		return a.Args.DeliveryID
	}
	return 0
}

func (m *Module[TTx]) ackTimeout(connID string) time.Duration {
	if connID == httpConnID {
		return m.set.HTTPTimeout + graceAfterDeadline
	}
	return m.set.AckTimeout
}

// write sends the DELIVER. A connection that closed before writing
// undoes the claim and hands the job back; an error after writing may
// have reached the customer, so the attempt ends unconfirmed.
func (m *Module[TTx]) write(ctx context.Context, l link, app *Application, a *attempt, rec *Record) error {
	d, err := buildDeliver(rec, app, cmpp.MsgID(a.outer))
	if err != nil {
		m.acks.conclude(a, outcome{Status: StatusFailed, Class: ClassEncode, Error: err.Error()})
		return nil
	}
	seq, err := l.Deliver(ctx, d)
	switch {
	case errors.Is(err, cmpp.ErrConnClosed) || errors.Is(err, cmpp.ErrWindowFull):
		a.freeSlot()
		if _, rerr := m.st.revert(context.WithoutCancel(ctx), rec.ID, a.token, err.Error()); rerr != nil {
			return rerr
		}
		return keel.JobSnooze(retrySnooze)
	case errors.Is(err, cmpp.ErrMalformed) || errors.Is(err, cmpp.ErrLength):
		m.acks.conclude(a, outcome{Status: StatusFailed, Class: ClassEncode, Error: err.Error()})
	case err != nil:
		m.acks.conclude(a, outcome{Status: StatusUnconfirmed, Class: ClassGateway, Error: err.Error()})
	default:
		a.seq = seq
		if e, early := m.track.register(a); early {
			m.onAck(a, e)
		}
	}
	return nil
}

// await waits up to inline for the attempt's outcome, then parks the job
// until the ACK deadline; the ACK handler wakes it.
func (m *Module[TTx]) await(ctx context.Context, r *pushReq, a *attempt, rec *Record, inline time.Duration) error {
	if inline > 0 {
		t := time.NewTimer(inline)
		select {
		case f := <-a.done:
			t.Stop()
			return m.jobOutcome(ctx, a, f, rec)
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	if !a.park() {
		return m.jobOutcome(ctx, a, <-a.done, rec)
	}
	if a.connID != httpConnID {
		// Visible evidence of the outstanding DELIVER while the job is
		// parked (the outcome records it too).
		_ = m.st.setSeq(context.WithoutCancel(ctx), rec.ID, a.token, int64(a.seq))
	}
	return keel.JobWait(keel.WaitACK, deadlineOf(rec, time.Now()).Add(graceAfterDeadline))
}

// jobOutcome turns an applied outcome into the job's result; an outcome
// that did not apply (something concluded the attempt first) sends the
// job back to read the record.
//
// A task item's failure is not returned as the job's failure: the item
// parks and the applier settles it, counting the failure toward the
// application's auto-pause before the window slot is freed (the write
// waiting for that slot then sees the pause).
func (m *Module[TTx]) jobOutcome(ctx context.Context, a *attempt, f finished, rec *Record) error {
	if !f.applied {
		a.freeSlot()
		return errRedecide
	}
	if f.status == StatusDelivered {
		// Counted by the completion the engine commits right after this
		// returns, before this slot claims again.
		a.gateDone()
		rec.Status = StatusDelivered
		return keel.RecordResult(ctx, resultOf(rec))
	}
	if a.batch && a.jobID > 0 {
		m.acks.settleLater(ctx, a)
		return keel.JobWait(keel.WaitACK, deadlineOf(rec, time.Now()).Add(graceAfterDeadline))
	}
	return failOutcome(f.class, f.err)
}

// failOutcome is the job's error for a failed attempt: a lost connection or
// process ends the item without counting it as the customer's failure.
func failOutcome(class, msg string) error {
	if unknownClass(class) {
		return keel.JobCancel(failure(class, msg))
	}
	return keel.JobFail(failure(class, msg))
}

// concludeTimeout ends this job's attempt whose deadline passed.
func (m *Module[TTx]) concludeTimeout(ctx context.Context, rec *Record) error {
	done, err := m.st.finishMany(ctx, []outcome{{ID: rec.ID, Token: rec.SendToken, Status: StatusUnconfirmed,
		Class: ClassAckTimeout, Error: "no ACK before the deadline", Event: event{Conn: rec.ConnID}}})
	if err != nil {
		return err
	}
	if !done[rec.ID] {
		return errRedecide
	}
	return keel.JobFail(failure(ClassAckTimeout, "no ACK before the deadline"))
}

// writerGone: the connection that carried the attempt's write is not live
// in this process, so no ACK for it can arrive here (its process died, or
// it closed; connection ids are unique per process).
func (m *Module[TTx]) writerGone(rec *Record) bool {
	return rec.ConnID == httpConnID || !m.links.hasConn(rec.AppID, rec.ConnID)
}

// concludeLost ends this job's attempt whose write may or may not have
// reached the customer, and whose ACK can no longer be read: the record
// becomes unconfirmed (conn_lost, kept with the attempt's evidence), and the
// item ends failed without counting toward the auto-pause threshold. It is
// not re-sent: the customer may have processed it; an operator requeues.
func (m *Module[TTx]) concludeLost(ctx context.Context, rec *Record) error {
	const msg = "the connection or process that wrote the DELIVER was lost before its ACK was read; the outcome is unknown"
	done, err := m.st.finishMany(ctx, []outcome{{ID: rec.ID, Token: rec.SendToken, Status: StatusUnconfirmed,
		Class: ClassConnLost, Error: msg, Event: event{Conn: rec.ConnID}}})
	if err != nil {
		return err
	}
	if !done[rec.ID] {
		return errRedecide
	}
	return failOutcome(ClassConnLost, msg)
}

// noLink: the application has no connection here. If another instance
// holds one, hand the job back for it; otherwise wait for the customer to
// connect (not a failure; the connect wakes the job).
func (m *Module[TTx]) noLink(app *Application) error {
	if m.pres.heldElsewhere(app.ID) {
		return keel.JobSnooze(elsewhereSnooze)
	}
	return keel.JobWait(keel.WaitConnection, time.Now().Add(m.set.ConnectionWait))
}

// failure is a job error "class: detail" (the class is what statistics
// and the console group by; the detail is the raw error).
func failure(class, msg string) error {
	if class == "" {
		class = ClassGateway
	}
	return fmt.Errorf("%s: %s", class, msg)
}

// itemResult is a successful attempt's job result.
type itemResult struct {
	Status Status `json:"record_status"`
	Conn   string `json:"conn,omitempty"`
	Outer  string `json:"deliver_msg_id,omitempty"`
}

func resultOf(rec *Record) itemResult {
	if rec == nil {
		return itemResult{}
	}
	return itemResult{Status: rec.Status, Conn: rec.ConnID, Outer: rec.DeliverMsgID}
}
