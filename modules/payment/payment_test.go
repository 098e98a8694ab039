package payment

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/payment/channel"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// TestPaymentDuplicateCallbacks is the seed's 数据演绎 8: five concurrent
// callbacks for T20260714001 make one success, one event and one ledger
// entry of 1,288.00 CNY; the channel got a success reply to every one; the
// event handled three more times still makes one entry.
func TestPaymentDuplicateCallbacks(t *testing.T) {
	each(t, testDuplicateCallbacks, testDuplicateCallbacks)
}

func testDuplicateCallbacks[TTx any](t *testing.T, e *tenv[TTx]) {
	e.start(t, startOpts{})
	ctx := context.Background()
	const no = "T20260714001"
	e.pay(t, channel.KindWeChat, no, 128800, "CNY")
	e.sim.Duplicate(5)
	if err := e.sim.Pay(channel.KindWeChat, no); err != nil {
		t.Fatal(err)
	}
	moduletest.WaitFor(t, 20*time.Second, "five callbacks acknowledged", func() bool { return e.sim.Acks(no) >= 5 })
	if got := e.sim.CallbacksSent(no); got != 5 {
		t.Fatalf("channel sent %d callbacks, want 5 (all acknowledged at once)", got)
	}
	if s := e.state(t, no); s != PayPaid {
		t.Fatalf("payment is %s", s)
	}
	if n := e.Count(t, "SELECT COUNT(*) FROM keel_events_outbox WHERE topic = $1 AND event_id = $2", TopicPaid, "payment:"+no+":succeeded"); n != 1 {
		t.Fatalf("%d success events, want 1", n)
	}
	if n := e.Count(t, "SELECT COUNT(*) FROM keel_events_outbox WHERE event_key = $1", no); n != 1 {
		t.Fatalf("%d events for the payment, want 1", n)
	}
	if a, d := e.Count(t, "SELECT COUNT(*) FROM pay_callback WHERE payment_no = $1 AND outcome = 'applied'", no),
		e.Count(t, "SELECT COUNT(*) FROM pay_callback WHERE payment_no = $1 AND outcome = 'duplicate'", no); a != 1 || d != 4 {
		t.Fatalf("callback evidence: %d applied, %d duplicate; want 1 and 4", a, d)
	}
	moduletest.WaitFor(t, 20*time.Second, "the ledger entry", func() bool {
		return e.Count(t, "SELECT COUNT(*) FROM pay_journal WHERE payment_no = $1", no) == 1
	})
	moduletest.WaitFor(t, 20*time.Second, "the order marked paid", func() bool {
		o, err := e.m.Order(ctx, "O"+no)
		return err == nil && o.State == OrderPaid
	})
	// The event handled again three times past the inbox (an ack lost, a
	// replay): the entry's unique key still books one.
	var d keelevents.Delivery
	var payload string
	if err := e.DB.QueryRow(ctx, e.SQL("SELECT payload FROM keel_events_outbox WHERE topic = $1 AND event_id = $2"), TopicPaid, "payment:"+no+":succeeded").Scan(&payload); err != nil {
		t.Fatal(err)
	}
	d.Topic, d.ID, d.Key, d.Payload = TopicPaid, "payment:"+no+":succeeded", no, []byte(payload)
	for i := 0; i < 3; i++ {
		if err := e.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error { return e.m.handleLedger(ctx, tx, &d) }); err != nil {
			t.Fatal(err)
		}
	}
	js, err := e.m.Journal(ctx, no)
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != 1 || js[0].Amount != 128800 || js[0].Currency != "CNY" || js[0].Action != "capture" {
		t.Fatalf("journal: %+v, want one capture of 128800 CNY", js)
	}
	if n := e.Count(t, "SELECT COUNT(*) FROM pay_journal_line WHERE journal_id = $1", js[0].ID); n != 2 {
		t.Fatalf("%d lines, want 2", n)
	}
	assertBalanced(t, e)
	accs, _ := e.m.Accounts(ctx)
	for _, a := range accs {
		if (a.Code == AccClearing || a.Code == AccPayable) && a.Balance != 128800 {
			t.Fatalf("account %s is %d, want 128800", a.Code, a.Balance)
		}
	}
}

func assertBalanced[TTx any](t *testing.T, e *tenv[TTx]) {
	t.Helper()
	rows, err := e.DB.Query(context.Background(), e.m.q.Get("JournalUnbalanced"))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if rows.Next() {
		t.Fatal("an unbalanced journal entry exists")
	}
}
