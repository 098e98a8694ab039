package payment

import (
	"context"
	"testing"
	"time"

	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/payment/channel"
)

// TestPaymentFeesPosted: the channel's fee from the bill is booked in the
// ledger — a payment's fee out of channel clearing into channel fees, a
// refund's returned fee back — each entry balanced and booked once, also
// when the bill is fetched again.
func TestPaymentFeesPosted(t *testing.T) { each(t, testFeesPosted, testFeesPosted) }

func testFeesPosted[TTx any](t *testing.T, e *tenv[TTx]) {
	e.start(t, startOpts{noSweep: true})
	ctx := context.Background()
	const no = "FEES000001"
	e.paid(t, channel.KindWeChat, no, 128800)
	r, err := e.m.CreateRefund(ctx, no, RefundRequest{RequestID: "req-a", AmountMinor: 28800, Reason: "退货"})
	if err != nil {
		t.Fatal(err)
	}
	moduletest.WaitFor(t, 30*time.Second, "refund "+r.RefundNo+" confirmed", func() bool { return e.refundState(t, r.RefundNo) == RefundDone })
	for range 2 {
		if _, err := e.m.FetchBill(ctx, channel.KindWeChat, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	// The simulator's fee is 0.6%: 7.73 on the payment, 1.73 returned with the refund.
	moduletest.WaitFor(t, 30*time.Second, "the fee and its return booked", func() bool {
		return e.Count(t, "SELECT COUNT(*) FROM pay_journal WHERE payment_no = $1 AND action IN ('fee', 'fee_return')", no) == 2
	})
	js, _ := e.m.Journal(ctx, no)
	got := map[string]int64{}
	for _, j := range js {
		got[j.Action] += j.Amount
	}
	if got["fee"] != 773 || got["fee_return"] != 173 || got["capture"] != 128800 {
		t.Fatalf("journal %+v, want a fee of 773, a return of 173 and a capture of 128800", got)
	}
	assertBalanced(t, e)
	want := map[string]int64{AccFees: 600, AccClearing: 128800 - 773 + 173 - 28800}
	moduletest.WaitFor(t, 30*time.Second, "balances settled", func() bool {
		accs, _ := e.m.Accounts(ctx)
		ok := 0
		for _, a := range accs {
			if w, in := want[a.Code]; in && a.Balance == w {
				ok++
			}
		}
		return ok == len(want)
	})
}
