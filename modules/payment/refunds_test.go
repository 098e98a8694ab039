package payment

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/paysim"
)

func (e *tenv[TTx]) paid(t *testing.T, kind channel.Kind, no string, amount int64) {
	t.Helper()
	e.pay(t, kind, no, amount, "CNY")
	if err := e.sim.Pay(kind, no); err != nil {
		t.Fatal(err)
	}
	moduletest.WaitFor(t, 20*time.Second, "payment "+no+" paid", func() bool {
		p, err := e.m.Payment(context.Background(), no)
		return err == nil && p.State == PayPaid
	})
}

// TestPartialRefunds: several partial refunds of one payment, each with its
// stable number; the same request again finds the same refund; a refund
// over what is left is refused, also when eight race for the last part;
// the channel executes each once and the ledger books start and
// settlement of each, leaving every account at zero.
func TestPartialRefunds(t *testing.T) { each(t, testPartialRefunds, testPartialRefunds) }

func testPartialRefunds[TTx any](t *testing.T, e *tenv[TTx]) {
	e.start(t, startOpts{noSweep: true})
	ctx := context.Background()
	const no = "PART000001"
	e.paid(t, channel.KindWeChat, no, 10000)
	r1, err := e.m.CreateRefund(ctx, no, RefundRequest{RequestID: "req-a", AmountMinor: 3000, Reason: "少发一件"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.m.CreateRefund(ctx, no, RefundRequest{RequestID: "req-a", AmountMinor: 3000, Reason: "少发一件"})
	if err != nil || again.RefundNo != r1.RefundNo {
		t.Fatalf("the same request: %v, %v; want refund %s", again, err, r1.RefundNo)
	}
	if _, err := e.m.CreateRefund(ctx, no, RefundRequest{RequestID: "req-a", AmountMinor: 3001}); !isProblem(err, ErrRequestConflict) {
		t.Fatalf("the same request id for another amount: %v", err)
	}
	r2, err := e.m.CreateRefund(ctx, no, RefundRequest{RequestID: "req-b", AmountMinor: 5000, Reason: "退货"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.CreateRefund(ctx, no, RefundRequest{RequestID: "req-c", AmountMinor: 2001}); !isProblem(err, ErrRefundExceeds) {
		t.Fatalf("over the paid amount: %v", err)
	}
	for _, bad := range []RefundRequest{{RequestID: "x", AmountMinor: -1}, {RequestID: "x", AmountMinor: 0},
		{RequestID: "", AmountMinor: 1}, {RequestID: "x", AmountMinor: 1 << 62}} {
		if _, err := e.m.CreateRefund(ctx, no, bad); !isProblem(err, ErrInvalid) {
			t.Fatalf("%+v: %v", bad, err)
		}
	}
	// Eight race for the last 2000.
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := []string{}
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.m.CreateRefund(ctx, no, RefundRequest{RequestID: fmt.Sprintf("race-%d", i), AmountMinor: 2000})
			if err == nil {
				mu.Lock()
				won = append(won, r.RefundNo)
				mu.Unlock()
			} else if !isProblem(err, ErrRefundExceeds) {
				t.Errorf("race %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d of the racing refunds were created, want 1", len(won))
	}
	nos := []string{r1.RefundNo, r2.RefundNo, won[0]}
	for _, rn := range nos {
		moduletest.WaitFor(t, 30*time.Second, "refund "+rn+" confirmed", func() bool { return e.refundState(t, rn) == RefundDone })
		if c := e.sim.RefundCalls(rn); c != 1 {
			t.Fatalf("the channel got %d calls for %s, want 1", c, rn)
		}
	}
	if nos[0] != no+"R01" || nos[1] != no+"R02" {
		t.Fatalf("refund numbers %v", nos)
	}
	tv, _ := e.sim.Trade(channel.KindWeChat, no)
	if tv.RefundedMinor != 10000 {
		t.Fatalf("the channel refunded %d, want 10000", tv.RefundedMinor)
	}
	p, _ := e.m.Payment(ctx, no)
	if p.RefundedMinor != 10000 || p.RefundReserved != 10000 {
		t.Fatalf("payment refunded %d reserved %d", p.RefundedMinor, p.RefundReserved)
	}
	moduletest.WaitFor(t, 30*time.Second, "the ledger: a capture, three starts, three settlements", func() bool {
		js, _ := e.m.Journal(ctx, no)
		return len(js) == 7
	})
	assertBalanced(t, e)
	accs, _ := e.m.Accounts(ctx)
	for _, a := range accs {
		if a.Balance != 0 {
			t.Fatalf("account %s is %d after refunding everything", a.Code, a.Balance)
		}
	}
}

// TestRefundUnknownQueriesFirst: a refund the channel executed and then
// timed out on is found by a query with the same number — no second call;
// one the channel proves it did not execute is retried with the same
// number; one whose outcome stays unknown goes to 人工核验 past the horizon,
// never called twice.
func TestRefundUnknownQueriesFirst(t *testing.T) { each(t, testRefundUnknown, testRefundUnknown) }

func testRefundUnknown[TTx any](t *testing.T, e *tenv[TTx]) {
	e.start(t, startOpts{noSweep: true, sim: paysim.Options{ClientTimeout: 500 * time.Millisecond},
		settings: map[string]string{"payment.refund_horizon": "2m"}}) // 120ms scaled
	ctx := context.Background()
	cases := []struct {
		no       string
		b        paysim.Behaviour
		want     string
		calls    int
		minQuery int
	}{
		{"UNKN000001", paysim.ExecuteThenTimeout, RefundDone, 1, 1},
		{"UNKN000002", paysim.FailNotExecuted, RefundDone, 2, 1},
		{"UNKN000003", paysim.Unavailable, RefundManual, 1, 1},
	}
	for _, c := range cases {
		e.paid(t, channel.KindWeChat, c.no, 8800)
		e.sim.RefundBehaviour(c.no+"R01", c.b)
		r, err := e.m.CreateRefund(ctx, c.no, RefundRequest{RequestID: "only", AmountMinor: 8800, Reason: "取消订单"})
		if err != nil {
			t.Fatal(err)
		}
		if r.RefundNo != c.no+"R01" {
			t.Fatalf("refund number %s", r.RefundNo)
		}
	}
	for _, c := range cases {
		rn := c.no + "R01"
		moduletest.WaitFor(t, 30*time.Second, "refund "+rn+" "+c.want, func() bool { return e.refundState(t, rn) == c.want })
		if got := e.sim.RefundCalls(rn); got != c.calls {
			t.Fatalf("%s: %d refund calls, want %d", rn, got, c.calls)
		}
		if got := e.sim.RefundQueries(rn); got < c.minQuery {
			t.Fatalf("%s: %d queries, want at least %d", rn, got, c.minQuery)
		}
		hist, _ := e.m.RefundHistory(ctx, rn)
		sawUnknown := false
		for _, h := range hist {
			sawUnknown = sawUnknown || h.To == RefundUnknown
		}
		if !sawUnknown {
			t.Fatalf("%s never went through 结果未知: %+v", rn, hist)
		}
		if n := e.Count(t, "SELECT COUNT(*) FROM pay_refund WHERE payment_no = $1", c.no); n != 1 {
			t.Fatalf("%s: %d refunds, want one number for the one intent", c.no, n)
		}
	}
	// The unknown one stays in the manual queue with its money reserved.
	p, _ := e.m.Payment(ctx, "UNKN000003")
	if p.RefundReserved != 8800 || p.RefundedMinor != 0 {
		t.Fatalf("manual refund's payment: reserved %d refunded %d", p.RefundReserved, p.RefundedMinor)
	}
}

// TestAlipayRefundNotifyQueriesFirst: Alipay's refund notify states only
// the trade's cumulative refund, not the refund's own amount. A refund the
// channel executed and never answered (outcome unknown) is settled by that
// notify only after the refund query under the same number confirms its
// amount: one refund call, one settled refund, the evidence with the
// queried amount, nothing in the security audit. The refund's own query
// schedule is set far out, so only the notify can settle it in time.
func TestAlipayRefundNotifyQueriesFirst(t *testing.T) {
	each(t, testAlipayRefundNotifyQueriesFirst, testAlipayRefundNotifyQueriesFirst)
}

func testAlipayRefundNotifyQueriesFirst[TTx any](t *testing.T, e *tenv[TTx]) {
	e.start(t, startOpts{noSweep: true, sim: paysim.Options{RefundCallbacks: true},
		settings: map[string]string{"payment.time_scale": "0.01", "payment.refund_backoff": "1h"}}) // 36s scaled
	ctx := context.Background()
	const no = "APRN000001"
	e.paid(t, channel.KindAlipay, no, 10000)
	e.sim.RefundBehaviour(no+"R01", paysim.ExecuteThenTimeout)
	r, err := e.m.CreateRefund(ctx, no, RefundRequest{RequestID: "req-a", AmountMinor: 3000, Reason: "退货"})
	if err != nil {
		t.Fatal(err)
	}
	moduletest.WaitFor(t, 20*time.Second, "refund "+r.RefundNo+" settled by the notify", func() bool {
		return e.refundState(t, r.RefundNo) == RefundDone
	})
	if c := e.sim.RefundCalls(r.RefundNo); c != 1 {
		t.Fatalf("the channel got %d refund calls, want 1", c)
	}
	if n := e.Count(t, "SELECT COUNT(*) FROM pay_callback WHERE refund_no = $1 AND outcome = 'applied' AND amount_minor = 3000", r.RefundNo); n != 1 {
		t.Fatalf("%d applied refund callbacks with the queried amount, want 1", n)
	}
	if n := e.Count(t, "SELECT COUNT(*) FROM pay_security_audit"); n != 0 {
		t.Fatalf("%d security audit rows, want none", n)
	}
}
