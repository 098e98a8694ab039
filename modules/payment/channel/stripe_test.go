package channel_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/paysim"
)

// TestChannelStripe drives the Stripe client (stripe-go against the
// simulator) through every call, and the webhook verifier through valid,
// tampered, stale and rolled-secret events.
func TestChannelStripe(t *testing.T) {
	t.Parallel()
	sim := startSim(t, paysim.Options{})
	const k = channel.KindStripe
	cfg := sim.Config(k)
	ch := newChannel(t, cfg)
	c := ch.Client
	ctx := ctxT(t)
	sim.Create(k, "ST1", 5000, "USD")

	n, err := c.QueryPayment(ctx, "ST1")
	if err != nil || n.State != channel.StateNotPaid {
		t.Fatalf("query before paying: %+v, %v", n, err)
	}
	if err := sim.PayWithoutCallback(k, "ST1"); err != nil {
		t.Fatal(err)
	}
	tv, _ := sim.Trade(k, "ST1")
	n, err = c.QueryPayment(ctx, "ST1")
	if err != nil || n.State != channel.StatePaid || n.AmountMinor != 5000 || n.Currency != "USD" || n.TransactionID != tv.TransactionID || n.At.IsZero() {
		t.Fatalf("query after paying: %+v, %v", n, err)
	}
	_, err = c.QueryPayment(ctx, "NOSUCH")
	wantErr(t, "query of an unknown trade", err, channel.ErrNotFound)

	r := channel.RefundRequest{OutTradeNo: "ST1", OutRefundNo: "ST1-R1", AmountMinor: 1200, TotalMinor: 5000, Currency: "USD"}
	rn, err := c.Refund(ctx, r)
	if err != nil || rn.State != channel.StateRefunded || rn.AmountMinor != 1200 || rn.OutRefundNo != "ST1-R1" || rn.RefundID == "" {
		t.Fatalf("refund: %+v, %v", rn, err)
	}
	again, err := c.Refund(ctx, r)
	if err != nil || again.RefundID != rn.RefundID {
		t.Fatalf("repeated refund: %+v, %v", again, err)
	}
	if got := sim.RefundCalls("ST1-R1"); got != 1 {
		t.Fatalf("repeating a refund that exists reached the refund endpoint: %d calls", got)
	}
	if q, err := c.QueryRefund(ctx, "ST1", "ST1-R1"); err != nil || q.State != channel.StateRefunded || q.AmountMinor != 1200 {
		t.Fatalf("refund query: %+v, %v", q, err)
	}
	_, err = c.QueryRefund(ctx, "ST1", "ST1-R9")
	wantErr(t, "query of a refund never made", err, channel.ErrNotFound)
	_, err = c.Refund(ctx, channel.RefundRequest{OutTradeNo: "ST1", OutRefundNo: "ST1-R2", AmountMinor: 4000, TotalMinor: 5000, Currency: "USD"})
	wantErr(t, "refund above what is left", err, channel.ErrRejected)

	sim.RefundBehaviour("ST1-R3", paysim.ExecuteThenDisconnect)
	// Go's transport replays a request carrying an Idempotency-Key when a
	// reused connection breaks before the answer, so the cut may end in the
	// channel's idempotent answer instead of an unknown outcome. Either way
	// the money moves once.
	cut, err := c.Refund(ctx, channel.RefundRequest{OutTradeNo: "ST1", OutRefundNo: "ST1-R3", AmountMinor: 100, TotalMinor: 5000, Currency: "USD"})
	if err != nil {
		wantErr(t, "refund executed then cut", err, channel.ErrUnknownOutcome)
	} else if cut.State != channel.StateRefunded {
		t.Fatalf("replayed refund answered %+v", cut)
	}
	if q, err := c.QueryRefund(ctx, "ST1", "ST1-R3"); err != nil || q.State != channel.StateRefunded {
		t.Fatalf("query after the cut: %+v, %v", q, err)
	}
	if tv, _ := sim.Trade(k, "ST1"); tv.RefundedMinor != 1300 {
		t.Fatalf("channel refunded %d, want 1300", tv.RefundedMinor)
	}

	wantErr(t, "closing a paid trade", c.ClosePayment(ctx, "ST1"), channel.ErrRejected)
	sim.Create(k, "ST2", 700, "USD")
	if err := c.ClosePayment(ctx, "ST2"); err != nil {
		t.Fatalf("closing an unpaid trade: %v", err)
	}
	if n, err := c.QueryPayment(ctx, "ST2"); err != nil || n.State != channel.StateClosed {
		t.Fatalf("query after close: %+v, %v", n, err)
	}

	if err := sim.BillAmount(k, "ST1", 3); err != nil {
		t.Fatal(err)
	}
	lines, err := c.Bill(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var pay, ref int
	for _, l := range lines {
		switch {
		case l.Event == channel.EventPayment && l.OutTradeNo == "ST1" && l.AmountMinor == 5003 && l.Currency == "USD" && l.TransactionID == tv.TransactionID:
			pay++
		case l.Event == channel.EventRefund && l.OutTradeNo == "ST1" && (l.OutRefundNo == "ST1-R1" || l.OutRefundNo == "ST1-R3") && l.RefundID != "":
			ref++
		default:
			t.Errorf("unexpected bill line %+v", l)
		}
	}
	if pay != 1 || ref != 2 {
		t.Fatalf("bill: %d payment lines and %d refund lines, want 1 and 2: %+v", pay, ref, lines)
	}

	// Webhooks.
	h, body, err := sim.Notification(k, "ST1")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ch.Verifier.Verify(ctx, h, body); err != nil || n.OutTradeNo != "ST1" || n.State != channel.StatePaid || n.NotifyID == "" {
		t.Fatalf("valid webhook: %+v, %v", n, err)
	}
	secret := cfg.WebhookSecrets[0]
	stale := http.Header{"Stripe-Signature": {paysim.StripeSignature(body, time.Now().Add(-6*time.Minute), secret)}}
	other := http.Header{"Stripe-Signature": {paysim.StripeSignature(body, time.Now(), "whsec_other")}}
	for _, c := range []struct {
		name string
		h    http.Header
		body []byte
		want error
	}{
		{"tampered body", h, bytes.Replace(body, []byte(`"amount":5000`), []byte(`"amount":5`), 1), channel.ErrSignature},
		{"another secret", other, body, channel.ErrSignature},
		{"no signature", http.Header{}, body, channel.ErrSignature},
		{"six minutes old", stale, body, channel.ErrSkew},
	} {
		if _, err := ch.Verifier.Verify(ctx, c.h, c.body); !errorsIs(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// A secret roll: webhooks carry signatures under both; a Keel holding
	// only the old secret and one holding both still verify.
	if _, err := sim.RotateKey(k); err != nil {
		t.Fatal(err)
	}
	h, body, _ = sim.Notification(k, "ST1")
	if _, err := ch.Verifier.Verify(ctx, h, body); err != nil {
		t.Fatalf("during the roll, old secret: %v", err)
	}
	both := newChannel(t, sim.Config(k))
	if len(sim.Config(k).WebhookSecrets) != 2 {
		t.Fatalf("config after a roll lists %d secrets", len(sim.Config(k).WebhookSecrets))
	}
	if _, err := both.Verifier.Verify(ctx, h, body); err != nil {
		t.Fatalf("during the roll, both secrets: %v", err)
	}
	h, body, _ = sim.RefundNotification(k, "ST1-R1")
	if n, err := both.Verifier.Verify(ctx, h, body); err != nil || n.Event != channel.EventRefund || n.OutRefundNo != "ST1-R1" || n.AmountMinor != 1200 {
		t.Fatalf("refund webhook: %+v, %v", n, err)
	}
}
