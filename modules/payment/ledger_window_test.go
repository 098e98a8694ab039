package payment

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/jetstream"
	"github.com/keelwork/keel/keelevents/jetstream/jstest"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module/moduletest"
)

// TestLedgerWindowOverJetStream: the ledger over a JetStream server with
// pinned consumers takes windows of its partitions. Payments whose capture,
// refund start and refund settlement are emitted one after the other, all
// keys interleaved, are booked once each, every payment's entries in emit
// order (journal ids rising: the refund never before its capture), the
// journal balanced, nothing in manual; and the server shows the ledger's
// partition consumers pinned with a window of ledgerWindow.
func TestLedgerWindowOverJetStream(t *testing.T) {
	t.Parallel()
	e := newTenv(moduletest.Postgres(t, testLines))
	ctx := context.Background()
	url := jstest.Embedded(t)
	const parts = 4
	bus, err := jetstream.New(ctx, jetstream.Config{URL: url, Partitions: parts, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	ev, err := keelevents.New(e.DB, bus, &keelevents.Config{Partitions: parts, StatsInterval: time.Hour, Logger: moduletest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	e.ev = ev
	e.start2(t, ev)

	const payments = 120
	no := func(i int) string { return fmt.Sprintf("LWIN%06d", i) }
	emit := func(step int) {
		var evs []keelevents.Event
		for i := range payments {
			n := no(i)
			var topic, id string
			var body []byte
			switch step {
			case 0:
				topic, id = TopicPaid, "payment:"+n+":succeeded"
				body, _ = json.Marshal(PaymentEvent{PaymentNo: n, OrderID: "O" + n, Channel: "wechat", MerchantID: "m",
					TransactionID: "t" + n, AmountMinor: 10000, Currency: "CNY", At: time.Now().UTC()})
			case 1, 2:
				topic, id = TopicRefundStarted, "refund:"+n+"R1:started"
				if step == 2 {
					topic, id = TopicRefundDone, "refund:"+n+"R1:succeeded"
				}
				body, _ = json.Marshal(RefundEvent{RefundNo: n + "R1", PaymentNo: n, AmountMinor: 2500, Currency: "CNY"})
			}
			evs = append(evs, keelevents.Event{Topic: topic, ID: id, Key: n, Payload: body})
		}
		if err := e.DB.InTx(ctx, func(tx keelsql.Tx[pgxTx]) error { return ev.EmitManyTx(ctx, tx, evs) }); err != nil {
			t.Fatal(err)
		}
	}
	for step := range 3 {
		emit(step)
	}
	moduletest.WaitFor(t, 60*time.Second, "every entry booked", func() bool {
		return e.Count(t, "SELECT COUNT(*) FROM pay_journal") == 3*payments
	})

	for i := range payments {
		js, err := e.m.Journal(ctx, no(i))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, j := range js {
			got = append(got, j.Action)
		}
		if fmt.Sprint(got) != "[capture refund_start refund_settle]" {
			t.Fatalf("payment %s booked as %v", no(i), got)
		}
		if !(js[0].ID < js[1].ID && js[1].ID < js[2].ID) {
			t.Fatalf("payment %s booked out of emit order: %+v", no(i), js)
		}
	}
	assertBalanced(t, e)
	if n := e.Count(t, "SELECT COUNT(*) FROM keel_events_manual"); n != 0 {
		t.Fatalf("%d events in manual", n)
	}

	// The server's view of the ledger's consumers.
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, "KEEL_PAYMENT")
	if err != nil {
		t.Fatal(err)
	}
	windowed := 0
	lister := stream.ListConsumers(ctx)
	for info := range lister.Info() {
		cfg := info.Config
		if cfg.PriorityPolicy == natsjs.PriorityPolicyPinned && cfg.MaxAckPending == ledgerWindow {
			windowed++
		}
	}
	if err := lister.Err(); err != nil {
		t.Fatal(err)
	}
	if windowed != parts {
		t.Fatalf("%d of the ledger's %d partition consumers are pinned with a window of %d", windowed, parts, ledgerWindow)
	}
}
