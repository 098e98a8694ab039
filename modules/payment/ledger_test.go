package payment

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
)

// TestLedgerBatchInOrder: one inbox batch carrying a payment's capture,
// a refund's start and that refund's failure (a reversing entry), with the
// capture delivered twice, books three entries in delivery order — the
// reversal finds the start booked earlier in the same batch — each
// balanced, the balances moved once by the net change; the same batch
// again books nothing.
func TestLedgerBatchInOrder(t *testing.T) { each(t, testLedgerBatchInOrder, testLedgerBatchInOrder) }

func testLedgerBatchInOrder[TTx any](t *testing.T, e *tenv[TTx]) {
	e.start(t, startOpts{noSweep: true, noRelay: true})
	ctx := context.Background()
	const no, rn = "LBAT000001", "LBAT000001R01"
	pay, _ := json.Marshal(PaymentEvent{PaymentNo: no, OrderID: "O" + no, Channel: "wechat", MerchantID: "m",
		TransactionID: "t" + no, AmountMinor: 10000, Currency: "CNY"})
	ref, _ := json.Marshal(RefundEvent{RefundNo: rn, PaymentNo: no, AmountMinor: 4000, Currency: "CNY"})
	d := func(topic, id string, body []byte) *keelevents.Delivery {
		var x keelevents.Delivery
		x.Topic, x.ID, x.Key, x.Payload = topic, id, no, body
		return &x
	}
	batch := []*keelevents.Delivery{
		d(TopicPaid, "payment:"+no+":succeeded", pay),
		d(TopicPaid, "payment:"+no+":succeeded", pay),
		d(TopicRefundStarted, "refund:"+rn+":started", ref),
		d(TopicRefundFailed, "refund:"+rn+":failed", ref),
	}
	for range 2 {
		if err := e.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error { return e.m.handleLedgerBatch(ctx, tx, batch) }); err != nil {
			t.Fatal(err)
		}
	}
	js, err := e.m.Journal(ctx, no)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"capture", "refund_start", "refund_reversal"}
	if len(js) != len(want) {
		t.Fatalf("journal %+v, want %v", js, want)
	}
	for i, j := range js {
		if j.Action != want[i] {
			t.Fatalf("entry %d is %s, want %s (journal %+v)", i, j.Action, want[i], js)
		}
	}
	if js[2].Reverses != js[1].ID {
		t.Fatalf("the reversal reverses %d, want the start %d", js[2].Reverses, js[1].ID)
	}
	assertBalanced(t, e)
	bal := map[string]int64{}
	accs, _ := e.m.Accounts(ctx)
	for _, a := range accs {
		bal[a.Code] = a.Balance
	}
	if bal[AccClearing] != 10000 || bal[AccPayable] != 10000 || bal[AccInFlight] != 0 {
		t.Fatalf("balances %v, want clearing and payable 10000, refunds in flight 0", bal)
	}
}
