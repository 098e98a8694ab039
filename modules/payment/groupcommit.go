package payment

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module/groupcommit"
	"github.com/keelwork/keel/modules/payment/channel"
)

// succeeder coalesces concurrent verified payment successes into one
// transaction (a group commit). A callback joins the lane of its payment
// number; the first caller to find the lane idle starts its leader, which
// takes every callback waiting (up to the bound, one per payment number) and runs one
// transaction of set-based statements — one statement moves every pending
// payment whose fields match by its conditional update and, in the same
// statement, writes their history rows and callback evidence; one writes
// their outbox events — then commits and answers each caller. A callback
// answered returns only after the transaction holding its effect
// committed, so the channel's success reply still follows the commit.
//
// The batch takes only the common case, a first success. A callback the
// batch did not move (a duplicate, a disagreement, a closed payment, a
// transaction id already used) is answered "alone": it runs the
// one-callback transaction, which reads the payment and classifies it as
// before. If the batch's transaction fails, every callback of it runs
// alone, so one bad row does not fail the others. Two callbacks for one
// payment never share a batch: the second waits for the next one, where
// the first has committed and it is a duplicate.
//
// On PostgreSQL a batch is those set-based statements (unnest and
// data-modifying CTEs). On SQLite, where statements run in-process and the
// cost of a write transaction is its commit on the one writer, a batch
// runs each callback's own one-callback statements in turn inside the one
// transaction: every callback is classified and answered by the batch
// itself (applied, duplicate, mismatch, …), and the batch pays one commit.
type succeeder[TTx any] struct {
	m *Module[TTx]
	g *groupcommit.Group[*sRequest]

	mu    sync.Mutex
	stats GroupStats // Applied, Alone and Failed; g counts the rest
}

// GroupStats counts the callback group commit's work.
type GroupStats struct {
	Lanes     int   `json:"lanes"`     // batches that may run at once
	Batches   int64 `json:"batches"`   // transactions run
	Callbacks int64 `json:"callbacks"` // callbacks they carried
	Applied   int64 `json:"applied"`   // first successes the batches applied
	Largest   int   `json:"largest"`   // most callbacks in one
	Alone     int64 `json:"alone"`     // callbacks sent to the one-callback path after a batch
	Failed    int64 `json:"failed"`    // batches whose transaction failed
	Waiting   int   `json:"waiting"`   // callbacks queued now for the next batch
}

type sRequest struct {
	n    *channel.Notice
	ev   evidence
	at   time.Time // the payment time the event carries
	ctx  context.Context
	done chan bool // true: answered by the batch (outcome, detail); false: run alone

	outcome, detail string
}

func newSucceeder[TTx any](m *Module[TTx], most, lanes int) *succeeder[TTx] {
	s := &succeeder[TTx]{m: m}
	no := func(r *sRequest) string { return r.n.OutTradeNo }
	s.g = groupcommit.New(groupcommit.Config[*sRequest]{
		Lanes: lanes,
		Max:   most,
		Lane:  no,
		Key:   no,
		Run:   s.run,
		// On a goroutine of its own, not the caller's: under a steady
		// stream the lane never empties, and a caller that led it would
		// never get to send its own reply.
		Spawn: true,
	})
	return s
}

// GroupStats returns the callback group commit's counters (nil batcher: zero).
func (m *Module[TTx]) GroupStats() GroupStats {
	if m.group == nil {
		return GroupStats{}
	}
	g := m.group.g.Stats()
	m.group.mu.Lock()
	defer m.group.mu.Unlock()
	s := m.group.stats
	s.Lanes, s.Batches, s.Callbacks, s.Largest, s.Waiting = g.Lanes, g.Batches, g.Requests, g.Largest, g.Waiting
	return s
}

// batchable is a notice the batch may apply: a payment success with a
// transaction id (anything else has its own rules in the one-callback
// path).
func batchable(n *channel.Notice) bool {
	return n.Event == channel.EventPayment && n.State == channel.StatePaid && n.TransactionID != ""
}

// succeed offers a verified success to the batch. It reports whether the
// batch answered it (committed), with its outcome; false means nothing of
// it was committed and the caller runs it alone.
func (s *succeeder[TTx]) succeed(ctx context.Context, n *channel.Notice, ev evidence) (outcome, detail string, ok bool) {
	at := n.At.UTC()
	if at.IsZero() {
		at = ev.at
	}
	r := &sRequest{n: n, ev: ev, at: at, ctx: ctx, done: make(chan bool, 1)}
	s.g.Submit(r)
	// Not selecting on ctx: the reply must not say "not applied" while the
	// batch holding this callback may still commit.
	if !<-r.done {
		return "", "", false
	}
	return r.outcome, r.detail, true
}

// run executes one batch and answers every callback of it: none is
// handed back to the group.
func (s *succeeder[TTx]) run(batch []*sRequest) []int {
	ctx := context.WithoutCancel(batch[0].ctx)
	var moved map[string]bool
	err := s.m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		var err error
		if s.m.db.Dialect() == "sqlite" {
			moved, err = s.runEachTx(tx, batch)
		} else {
			moved, err = s.runTx(ctx, tx, batch)
		}
		return err
	})
	applied := 0
	if err != nil {
		moved = nil
	}
	for _, r := range batch {
		if moved[r.n.OutTradeNo] && (r.outcome == "" || r.outcome == OutcomeApplied) {
			applied++
		}
	}
	s.mu.Lock()
	if err != nil {
		s.stats.Failed++
	}
	s.stats.Applied += int64(applied)
	s.stats.Alone += int64(len(batch) - len(moved))
	s.mu.Unlock()
	if err != nil {
		s.m.Log.Warn("payment callback batch failed; its callbacks run one by one", "callbacks", len(batch), "err", err)
	}
	for _, r := range batch {
		if moved[r.n.OutTradeNo] && r.outcome == "" {
			r.outcome = OutcomeApplied
		}
		r.done <- moved[r.n.OutTradeNo]
	}
	return nil
}

// runEachTx is SQLite's batch: each callback's one-callback statements in
// turn, in the one transaction. It returns the payment numbers it answered
// (all of them, or an error that sends all of them alone).
func (s *succeeder[TTx]) runEachTx(tx keelsql.Tx[TTx], batch []*sRequest) (map[string]bool, error) {
	m := s.m
	answered := make(map[string]bool, len(batch))
	asked := false
	for _, r := range batch {
		ctx := context.WithoutCancel(r.ctx)
		outcome, detail, err := m.applyPayment(ctx, tx, r.n, r.ev)
		if err != nil {
			for _, r := range batch {
				r.outcome, r.detail = "", ""
			}
			return nil, fmt.Errorf("callback for %s: %w", r.n.OutTradeNo, err)
		}
		if outcome == OutcomeMismatch && !asked {
			// One run of the callbacks reconciler per batch opens every
			// disagreement the batch recorded.
			if err := m.askRecon(ctx, tx); err != nil {
				return nil, err
			}
			asked = true
		}
		r.outcome, r.detail = outcome, detail
		answered[r.n.OutTradeNo] = true
	}
	return answered, nil
}

// runTx is the batch's transaction: two statements whatever its size. It
// returns the payment numbers it moved.
func (s *succeeder[TTx]) runTx(ctx context.Context, tx keelsql.Tx[TTx], batch []*sRequest) (map[string]bool, error) {
	m := s.m
	k := len(batch)
	nos, txns, chans, merchants, apps, currencies := make([]string, k), make([]string, k), make([]string, k), make([]string, k), make([]string, k), make([]string, k)
	notifyIDs, digests, bodies, actors, reasons := make([]string, k), make([]string, k), make([]string, k), make([]string, k), make([]string, k)
	amounts := make([]int64, k)
	paidAt, received := make([]time.Time, k), make([]time.Time, k)
	for i, r := range batch {
		n := r.n
		nos[i], txns[i], chans[i], merchants[i], apps[i], currencies[i] = n.OutTradeNo, n.TransactionID, string(n.Channel), n.MerchantID, n.AppID, n.Currency
		notifyIDs[i], digests[i], bodies[i] = n.NotifyID, r.ev.digest, r.ev.body
		actors[i] = actorOr(r.ctx, "channel:"+string(n.Channel))
		reasons[i] = r.ev.source + " " + n.TransactionID
		amounts[i], paidAt[i], received[i] = n.AmountMinor, r.at, r.ev.at
	}
	rows, err := tx.Query(ctx, m.q.Get("PaymentSucceedMany"), keelsql.ArrayOf(nos), keelsql.ArrayOf(txns),
		keelsql.ArrayOf(chans), keelsql.ArrayOf(merchants), keelsql.ArrayOf(apps), keelsql.ArrayOf(amounts),
		keelsql.ArrayOf(currencies), keelsql.ArrayOf(paidAt), keelsql.ArrayOf(received), keelsql.ArrayOf(notifyIDs),
		keelsql.ArrayOf(digests), keelsql.ArrayOf(bodies), keelsql.ArrayOf(actors), keelsql.ArrayOf(reasons), batch[0].ev.source)
	if err != nil {
		return nil, fmt.Errorf("moving %d payments: %w", k, err)
	}
	byNo := make(map[string]*sRequest, k)
	for _, r := range batch {
		byNo[r.n.OutTradeNo] = r
	}
	moved := make(map[string]bool, k)
	var evs []keelevents.Event
	for rows.Next() {
		var p PaymentEvent
		if err := rows.Scan(&p.PaymentNo, &p.OrderID, &p.Channel, &p.MerchantID, &p.TransactionID, &p.AmountMinor,
			&p.Currency); err != nil {
			rows.Close()
			return nil, fmt.Errorf("moving %d payments: %w", k, err)
		}
		r := byNo[p.PaymentNo]
		if r == nil {
			rows.Close()
			return nil, fmt.Errorf("moving %d payments: %s moved but not asked for", k, p.PaymentNo)
		}
		// The time as the request has it (not read back, which the
		// database rounds to microseconds): the payload, and so its
		// digest, is the one-callback path's to the byte.
		p.At = r.at
		body, err := json.Marshal(p)
		if err != nil {
			rows.Close()
			return nil, err
		}
		moved[p.PaymentNo] = true
		// The same id as the one-callback path's (emitPayment): the
		// business intent, whichever path applied it.
		evs = append(evs, keelevents.Event{Topic: TopicPaid, ID: "payment:" + p.PaymentNo + ":succeeded", Key: p.PaymentNo, Payload: body})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("moving %d payments: %w", k, err)
	}
	if err := m.ev.EmitManyTx(ctx, tx, evs); err != nil {
		return nil, err
	}
	return moved, nil
}

// applyFast applies a verified notice, through the batch when it is a
// first success, alone otherwise.
func (m *Module[TTx]) applyFast(ctx context.Context, n *channel.Notice, ev evidence) (string, string, error) {
	if m.group != nil && batchable(n) {
		if outcome, detail, ok := m.group.succeed(ctx, n, ev); ok {
			return outcome, detail, nil
		}
	}
	return m.apply(ctx, n, ev)
}
