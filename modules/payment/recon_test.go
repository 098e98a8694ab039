package payment

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/payment/channel"
)

func (e *tenv[TTx]) settled(t *testing.T, nos ...string) {
	t.Helper()
	ctx := context.Background()
	for _, no := range nos {
		moduletest.WaitFor(t, 30*time.Second, "ledger and order of "+no, func() bool {
			js, _ := e.m.Journal(ctx, no)
			o, _ := e.m.Order(ctx, "O"+no)
			return len(js) >= 1 && o != nil && o.State == OrderPaid
		})
	}
}

func (e *tenv[TTx]) run(t *testing.T, name string) *keelrecon.Run {
	t.Helper()
	return e.runAt(t, name, time.Now())
}

func (e *tenv[TTx]) runAt(t *testing.T, name string, cutoff time.Time) *keelrecon.Run {
	t.Helper()
	ctx := keel.WithActor(context.Background(), "operator:test")
	r, err := e.recon.Run(ctx, name, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != "succeeded" {
		t.Fatalf("run %s: %s %s", name, r.State, r.Error)
	}
	return r
}

func (e *tenv[TTx]) open(t *testing.T, name string) map[string]*keelrecon.DiscrepancyRow {
	t.Helper()
	out := map[string]*keelrecon.DiscrepancyRow{}
	ds, err := e.recon.ListDiscrepancies(context.Background(), keelrecon.DiscrepancyFilter{Reconciler: name, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		out[d.Key] = d
	}
	return out
}

// TestReconciliation4Way: the channel's bill with one discrepancy of each
// class — ours missing, theirs missing, a duplicate, an amount and a status
// mismatch, and an offsetting +1/−1 pair whose totals agree — is found
// transaction by transaction, each exactly once and classified, with the
// four sources as evidence; a rerun gives the same digest. Then a trade
// paid without a callback (missing ours, with a payment order pending) is
// healed by the run itself: by querying the channel and applying through
// the original event id, and the next run verifies it.
func TestReconciliation4Way(t *testing.T) { each(t, testRecon4Way, testRecon4Way) }

func testRecon4Way[TTx any](t *testing.T, e *tenv[TTx]) {
	e.start(t, startOpts{noSweep: true})
	ctx := context.Background()
	wx := channel.KindWeChat
	nos := map[string]string{"ok": "RCOK000001", "theirs": "RCTH000001", "dup": "RCDU000001", "amount": "RCAM000001",
		"status": "RCST000001", "plus": "RCPL000001", "minus": "RCMI000001", "refund": "RCRF000001"}
	for _, no := range nos {
		e.paid(t, wx, no, 12345)
	}
	if _, err := e.m.CreateRefund(ctx, nos["refund"], RefundRequest{RequestID: "r", AmountMinor: 345}); err != nil {
		t.Fatal(err)
	}
	moduletest.WaitFor(t, 30*time.Second, "the refund", func() bool { return e.refundState(t, nos["refund"]+"R01") == RefundDone })
	for _, no := range nos {
		e.settled(t, no)
	}
	const ghost = "RCGH000001"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.sim.InjectMissingOurs(wx, ghost, 777, "CNY"))
	must(e.sim.BillDrop(wx, nos["theirs"]))
	must(e.sim.BillDuplicate(wx, nos["dup"]))
	must(e.sim.BillAmount(wx, nos["amount"], 500))
	must(e.sim.BillState(wx, nos["status"], channel.StateClosed))
	must(e.sim.BillOffsettingPair(wx, nos["plus"], nos["minus"]))
	if _, err := e.m.FetchBill(ctx, wx, time.Now()); err != nil {
		t.Fatal(err)
	}
	cutoff := time.Now()
	r1 := e.runAt(t, ReconChannel, cutoff)
	want := map[string]keelrecon.Class{
		"pay:" + ghost:         keelrecon.MissingOurs,
		"pay:" + nos["theirs"]: keelrecon.MissingTheirs,
		"pay:" + nos["dup"]:    keelrecon.Duplicate,
		"pay:" + nos["amount"]: keelrecon.AmountMismatch,
		"pay:" + nos["status"]: keelrecon.StatusMismatch,
		"pay:" + nos["plus"]:   keelrecon.AmountMismatch,
		"pay:" + nos["minus"]:  keelrecon.AmountMismatch,
	}
	got := e.open(t, ReconChannel)
	if len(got) != len(want) || r1.Found != int64(len(want)) {
		keys := []string{}
		for k, d := range got {
			keys = append(keys, k+"="+string(d.Class))
		}
		sort.Strings(keys)
		t.Fatalf("found %d (%v), want %d", len(got), keys, len(want))
	}
	for k, c := range want {
		d := got[k]
		if d == nil || d.Class != c {
			t.Fatalf("%s: %+v, want class %s", k, d, c)
		}
		if len(d.Evidence["channel"]) == 0 || len(d.Evidence["ours"]) == 0 {
			t.Fatalf("%s: evidence %v", k, d.Evidence)
		}
	}
	if d := got["pay:"+nos["status"]]; len(d.Evidence["ledger"]) == 0 || len(d.Evidence["orders"]) == 0 {
		t.Fatalf("status mismatch without ledger and order evidence: %v", d.Evidence)
	}
	if got["pay:"+nos["plus"]].Impact != 1 || got["pay:"+nos["minus"]].Impact != -1 {
		t.Fatal("the offsetting pair's impacts are not +1 and -1")
	}
	r2 := e.runAt(t, ReconChannel, cutoff) // the same inputs: the same result
	if r2.Digest != r1.Digest || r2.Found != r1.Found || r2.Opened != 0 {
		t.Fatalf("rerun: digest %s found %d opened %d; first %s found %d", r2.Digest, r2.Found, r2.Opened, r1.Digest, r1.Found)
	}

	// Missing ours with a payment order: healed by query, through the
	// original event id.
	const heal = "RCHE000001"
	e.pay(t, wx, heal, 4321, "CNY")
	must(e.sim.PayWithoutCallback(wx, heal))
	if _, err := e.m.FetchBill(ctx, wx, time.Now()); err != nil {
		t.Fatal(err)
	}
	q := e.sim.Queries(heal)
	r3 := e.run(t, ReconChannel)
	if r3.Healed != 1 {
		t.Fatalf("healed %d, want 1", r3.Healed)
	}
	if e.sim.Queries(heal) != q+1 {
		t.Fatalf("the heal did not query the channel (%d queries)", e.sim.Queries(heal)-q)
	}
	if s := e.state(t, heal); s != PayPaid {
		t.Fatalf("healed payment is %s", s)
	}
	if n := e.Count(t, "SELECT COUNT(*) FROM keel_events_outbox WHERE topic = $1 AND event_id = $2", TopicPaid, "payment:"+heal+":succeeded"); n != 1 {
		t.Fatalf("%d success events for the healed payment", n)
	}
	e.settled(t, heal)
	e.run(t, ReconChannel)
	d := e.open(t, ReconChannel)["pay:"+heal]
	if d == nil || d.State != keelrecon.StateVerified {
		t.Fatalf("healed discrepancy: %+v, want verified", d)
	}
}

// TestCompensationApproval: money the channel took for an order we closed
// is a status mismatch whose refund is above the threshold: executing
// without approval is refused, the requester cannot approve it, a second
// operator can; sixteen concurrent executions run it once (one refund, one
// channel call); the next run no longer finds it and verifies it.
func TestCompensationApproval(t *testing.T) { each(t, testCompensation, testCompensation) }

func testCompensation[TTx any](t *testing.T, e *tenv[TTx]) {
	e.start(t, startOpts{noSweep: true, settings: map[string]string{"payment.pay_timeout": "1m"}})
	base := context.Background()
	alice := keel.WithActor(base, "operator:alice")
	bob := keel.WithActor(base, "operator:bob")
	wx := channel.KindWeChat
	const no = "COMP000001"
	e.pay(t, wx, no, 200000, "CNY") // 2,000.00: above the default 1,000.00
	moduletest.WaitFor(t, 10*time.Second, "the payment timeout", func() bool {
		p, _ := e.m.Payment(base, no)
		return time.Now().After(p.ExpiresAt)
	})
	if st, err := e.m.QueryPayment(base, no); err != nil || st != PayClosed {
		t.Fatalf("close: %s %v", st, err)
	}
	// Paid at the channel as the close was in flight; the callback is lost.
	if err := e.sim.PayWithoutCallback(wx, no); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.FetchBill(base, wx, time.Now()); err != nil {
		t.Fatal(err)
	}
	e.run(t, ReconChannel)
	d := e.open(t, ReconChannel)["pay:"+no]
	if d == nil || d.Class != keelrecon.StatusMismatch || d.State != keelrecon.StateOpen {
		t.Fatalf("discrepancy %+v", d)
	}
	if _, err := e.recon.Execute(alice, d.ID, "退回关闭后到账的款项"); !errors.Is(err, keelrecon.ErrApprovalRequired) {
		t.Fatalf("execute before approval: %v", err)
	}
	if _, err := e.recon.RequestApproval(alice, d.ID, "关闭后到账, 申请原路退款"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.recon.Approve(alice, d.ID, "我自己批准"); !errors.Is(err, keelrecon.ErrSelfApproval) {
		t.Fatalf("self-approval: %v", err)
	}
	if _, err := e.recon.Approve(bob, d.ID, "核实渠道账单, 同意退款"); err != nil {
		t.Fatal(err)
	}
	var ok, already atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.recon.Execute(bob, d.ID, "执行已批准的退款")
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, keelrecon.ErrAlreadyExecuted):
				already.Add(1)
			default:
				t.Errorf("execute: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 || already.Load() != 15 {
		t.Fatalf("%d executed, %d already executed; want 1 and 15", ok.Load(), already.Load())
	}
	rs, _ := e.m.Refunds(base, "", no, "", 10)
	if len(rs) != 1 || rs[0].AmountMinor != 200000 {
		t.Fatalf("refunds %+v, want one of 200000", rs)
	}
	moduletest.WaitFor(t, 30*time.Second, "the refund at the channel", func() bool { return e.refundState(t, rs[0].RefundNo) == RefundDone })
	if c := e.sim.RefundCalls(rs[0].RefundNo); c != 1 {
		t.Fatalf("%d refund calls", c)
	}
	if s := e.state(t, no); s != PayManual {
		t.Fatalf("payment is %s", s)
	}
	if n := e.Count(t, "SELECT COUNT(*) FROM pay_compensation WHERE subject = $1", "pay:"+no); n != 1 {
		t.Fatalf("%d compensations", n)
	}
	moduletest.WaitFor(t, 30*time.Second, "late receipt, refund start and settlement booked", func() bool {
		js, _ := e.m.Journal(base, no)
		return len(js) == 3
	})
	if _, err := e.m.FetchBill(base, wx, time.Now()); err != nil {
		t.Fatal(err)
	}
	e.run(t, ReconChannel)
	d = e.open(t, ReconChannel)["pay:"+no]
	if d == nil || d.State != keelrecon.StateVerified {
		t.Fatalf("after the next run: %+v, want verified", d)
	}
	if left := e.open(t, ReconChannel); len(left) != 1 {
		t.Fatalf("other discrepancies: %v", left)
	}
}

// TestReconciliationIntraday: the intraday incremental run finds, before
// the channel's bill is out, a payment paid past payment.recon_lag whose
// ledger entry and order update have not come (the relay is not running,
// so its event stays in the outbox): once each, with the four sources'
// evidence, as a partial run that records its scope. A payment paid
// yesterday is not its business (the daily full run's), nor is a payment
// paid within the lag. A rerun over the same cutoff is identical; once an
// operator books the entry and marks the order through the original event
// id, the next run verifies both.
func TestReconciliationIntraday(t *testing.T) { each(t, testIntraday, testIntraday) }

func testIntraday[TTx any](t *testing.T, e *tenv[TTx]) {
	e.start(t, startOpts{noSweep: true, noRelay: true, settings: map[string]string{"payment.recon_lag": "10s"}})
	base := context.Background()
	ops := keel.WithActor(base, "operator:alice")
	wx := channel.KindWeChat
	const late, fresh, old = "INTR000001", "INTR000002", "INTR000003"
	for _, no := range []string{late, fresh, old} {
		e.paid(t, wx, no, 12800)
	}
	// Paid a minute ago, just now and yesterday (China Standard Time).
	now := time.Now().UTC().Truncate(time.Microsecond)
	for no, at := range map[string]time.Time{late: now.Add(-time.Minute), fresh: now, old: startOfDay(now).Add(-time.Hour)} {
		q := e.SQL("UPDATE pay_payment SET paid_at = $1, updated_at = $1, created_at = $1 WHERE payment_no = $2")
		if _, err := e.DB.Exec(base, q, at, no); err != nil {
			t.Fatal(err)
		}
	}
	cutoff := now
	r1 := e.runAt(t, ReconIntraday, cutoff)
	got := e.open(t, ReconIntraday)
	if r1.Found != 2 || len(got) != 2 || r1.Scope == "" || r1.Compared != 2 {
		t.Fatalf("first run: found %d compared %d scope %q: %v", r1.Found, r1.Compared, r1.Scope, got)
	}
	ledger, order := got["ledger:"+late], got["order:O"+late]
	if ledger == nil || ledger.Class != keelrecon.MissingOurs || order == nil || order.Class != keelrecon.StatusMismatch {
		t.Fatalf("discrepancies %v", got)
	}
	for _, d := range got {
		if d.State != keelrecon.StateOpen || len(d.Evidence["ours"]) == 0 || len(d.Evidence["ledger"]) == 0 || len(d.Evidence["orders"]) == 0 {
			t.Fatalf("%s: state %s evidence %v", d.Key, d.State, d.Evidence)
		}
	}
	r2 := e.runAt(t, ReconIntraday, cutoff)
	if r2.Digest != r1.Digest || r2.Opened != 0 || r2.Resolved != 0 {
		t.Fatalf("rerun: digest %s opened %d resolved %d; first %s", r2.Digest, r2.Opened, r2.Resolved, r1.Digest)
	}
	for _, d := range []*keelrecon.DiscrepancyRow{ledger, order} {
		if _, err := e.recon.Execute(ops, d.ID, "消费者积压, 按原事件号补记"); err != nil {
			t.Fatalf("execute %s: %v", d.Key, err)
		}
	}
	if js, _ := e.m.Journal(base, late); len(js) != 1 {
		t.Fatalf("%d journal entries after the operator booked", len(js))
	}
	if o, _ := e.m.Order(base, "O"+late); o == nil || o.State != OrderPaid {
		t.Fatalf("order after the operator marked it: %+v", o)
	}
	r3 := e.run(t, ReconIntraday)
	if r3.Verified != 2 || r3.Found != 0 {
		t.Fatalf("after the fixes: verified %d found %d", r3.Verified, r3.Found)
	}
	for _, d := range e.open(t, ReconIntraday) {
		if d.State != keelrecon.StateVerified {
			t.Fatalf("%s: %s, want verified", d.Key, d.State)
		}
	}
}
