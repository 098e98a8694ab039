package channel_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/paysim"
)

// TestChannelClientRoundTrip drives every client call of both channels
// against the simulator and checks what the channel recorded.
func TestChannelClientRoundTrip(t *testing.T) {
	t.Parallel()
	sim := startSim(t, paysim.Options{})
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			ctx := ctxT(t)
			c := newChannel(t, sim.Config(kind)).Client
			no := "T" + string(kind) + "001"
			sim.Create(kind, no, 128800, "CNY")

			n, err := c.QueryPayment(ctx, no)
			if err != nil || n.State != channel.StateNotPaid || n.OutTradeNo != no {
				t.Fatalf("query before paying: %+v, %v", n, err)
			}
			if err := sim.PayWithoutCallback(kind, no); err != nil {
				t.Fatal(err)
			}
			n, err = c.QueryPayment(ctx, no)
			if err != nil {
				t.Fatal(err)
			}
			tv, _ := sim.Trade(kind, no)
			if n.State != channel.StatePaid || n.AmountMinor != 128800 || n.Currency != "CNY" ||
				n.TransactionID != tv.TransactionID || n.At.IsZero() || n.MerchantID != sim.Config(kind).MerchantID {
				t.Fatalf("query after paying: %+v (channel has %+v)", n, tv)
			}
			if got := sim.Queries(no); got != 2 {
				t.Fatalf("channel answered %d queries, want 2", got)
			}

			// Two partial refunds, the first repeated with its number.
			r := channel.RefundRequest{OutTradeNo: no, OutRefundNo: no + "-R1", AmountMinor: 28800, TotalMinor: 128800, Currency: "CNY", Reason: "部分退款"}
			rn, err := c.Refund(ctx, r)
			if err != nil || rn.State != channel.StateRefunded || rn.AmountMinor != 28800 || rn.OutRefundNo != r.OutRefundNo {
				t.Fatalf("refund: %+v, %v", rn, err)
			}
			if _, err := c.Refund(ctx, r); err != nil {
				t.Fatalf("repeating the refund with its number: %v", err)
			}
			if tv, _ := sim.Trade(kind, no); tv.RefundedMinor != 28800 || sim.RefundCalls(r.OutRefundNo) != 2 {
				t.Fatalf("channel refunded %d after %d calls, want 28800 after 2", tv.RefundedMinor, sim.RefundCalls(r.OutRefundNo))
			}
			qn, err := c.QueryRefund(ctx, no, r.OutRefundNo)
			if err != nil || qn.State != channel.StateRefunded || qn.AmountMinor != 28800 || qn.At.IsZero() {
				t.Fatalf("refund query: %+v, %v", qn, err)
			}
			r2 := r
			r2.OutRefundNo, r2.AmountMinor = no+"-R2", 100001 // more than is left
			_, err = c.Refund(ctx, r2)
			wantErr(t, "refund above what is left", err, channel.ErrRejected)
			_, err = c.QueryRefund(ctx, no, no+"-R9")
			wantErr(t, "query of a refund never made", err, channel.ErrNotFound)

			_, err = c.QueryPayment(ctx, "NOSUCH"+string(kind))
			wantErr(t, "query of an unknown trade", err, channel.ErrNotFound)
			wantErr(t, "closing a paid trade", c.ClosePayment(ctx, no), channel.ErrRejected)
			wantErr(t, "closing an unknown trade", c.ClosePayment(ctx, "NOSUCH"+string(kind)), channel.ErrNotFound)

			open := no + "-open"
			sim.Create(kind, open, 500, "CNY")
			if err := c.ClosePayment(ctx, open); err != nil {
				t.Fatalf("closing an unpaid trade: %v", err)
			}
			if n, err := c.QueryPayment(ctx, open); err != nil || n.State != channel.StateClosed {
				t.Fatalf("query after close: %+v, %v", n, err)
			}

			// An instant in any zone names the channel's day containing it.
			lines, err := c.Bill(ctx, time.Now().UTC())
			if err != nil {
				t.Fatalf("bill: %v", err)
			}
			var pay, ref int
			for _, l := range lines {
				switch {
				case l.Event == channel.EventPayment && l.OutTradeNo == no:
					pay++
					if l.AmountMinor != 128800 || l.State != channel.StatePaid || l.FeeMinor != 773 || l.TransactionID != tv.TransactionID {
						t.Fatalf("bill payment line %+v", l)
					}
				case l.Event == channel.EventRefund && l.OutRefundNo == r.OutRefundNo:
					ref++
					if l.AmountMinor != 28800 || l.State != channel.StateRefunded || l.FeeMinor != -173 {
						t.Fatalf("bill refund line %+v", l)
					}
				}
			}
			if pay != 1 || ref != 1 || len(lines) != 2 {
				t.Fatalf("bill has %d lines (%d payment, %d refund), want exactly the payment and the refund: %+v", len(lines), pay, ref, lines)
			}
		})
	}
}

// TestChannelRefundUnknownOutcome shows each way a refund can end without
// a clear answer, and what the query then proves.
func TestChannelRefundUnknownOutcome(t *testing.T) {
	t.Parallel()
	sim := startSim(t, paysim.Options{})
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			ctx := ctxT(t)
			cfg := sim.Config(kind)
			c := newChannel(t, cfg).Client
			no := "U" + string(kind)
			sim.Create(kind, no, 10000, "CNY")
			if err := sim.PayWithoutCallback(kind, no); err != nil {
				t.Fatal(err)
			}
			req := func(n string) channel.RefundRequest {
				return channel.RefundRequest{OutTradeNo: no, OutRefundNo: n, AmountMinor: 1000, TotalMinor: 10000, Currency: "CNY"}
			}

			// Executed, then the connection is cut: unknown; the query finds it done.
			sim.RefundBehaviour(no+"-cut", paysim.ExecuteThenDisconnect)
			_, err := c.Refund(ctx, req(no+"-cut"))
			wantErr(t, "refund executed then cut", err, channel.ErrUnknownOutcome)
			if n, err := c.QueryRefund(ctx, no, no+"-cut"); err != nil || n.State != channel.StateRefunded {
				t.Fatalf("query after cut: %+v, %v", n, err)
			}

			// Executed, then no answer until the client's timeout.
			short := cfg
			short.HTTPTimeout = 2 * time.Second // long enough for the call to arrive on a loaded machine
			sc := newChannel(t, short).Client
			sim.RefundBehaviour(no+"-slow", paysim.ExecuteThenTimeout)
			_, err = sc.Refund(ctx, req(no+"-slow"))
			wantErr(t, "refund executed then timed out", err, channel.ErrUnknownOutcome)
			if n, err := c.QueryRefund(ctx, no, no+"-slow"); err != nil || n.State != channel.StateRefunded {
				t.Fatalf("query after timeout: %+v, %v", n, err)
			}

			// Not executed: the query proves it, a retry with the same number works.
			sim.RefundBehaviour(no+"-fail", paysim.FailNotExecuted)
			_, err = c.Refund(ctx, req(no+"-fail"))
			wantErr(t, "refund failing with a server error", err, channel.ErrUnknownOutcome)
			_, err = c.QueryRefund(ctx, no, no+"-fail")
			wantErr(t, "query of the failed refund", err, channel.ErrNotFound)
			if n, err := c.Refund(ctx, req(no+"-fail")); err != nil || n.State != channel.StateRefunded {
				t.Fatalf("retry with the same number: %+v, %v", n, err)
			}

			sim.RefundBehaviour(no+"-no", paysim.Refused)
			_, err = c.Refund(ctx, req(no+"-no"))
			wantErr(t, "refused refund", err, channel.ErrRejected)

			sim.RefundBehaviour(no+"-down", paysim.Unavailable)
			_, err = c.Refund(ctx, req(no+"-down"))
			wantErr(t, "refund while unavailable", err, channel.ErrUnknownOutcome)
			_, err = c.QueryRefund(ctx, no, no+"-down")
			wantErr(t, "refund query while unavailable", err, channel.ErrUnknownOutcome)

			// Processing until the channel settles it (Alipay refunds at once).
			sim.RefundBehaviour(no+"-proc", paysim.Processing)
			pn, err := c.Refund(ctx, req(no+"-proc"))
			want := channel.StateRefunding
			if kind == channel.KindAlipay {
				want = channel.StateRefunded
			}
			if err != nil || pn.State != want {
				t.Fatalf("processing refund: %+v, %v, want %s", pn, err, want)
			}
			if kind != channel.KindAlipay {
				if q, err := c.QueryRefund(ctx, no, no+"-proc"); err != nil || q.State != channel.StateRefunding {
					t.Fatalf("query of the processing refund: %+v, %v", q, err)
				}
				if err := sim.SettleRefund(kind, no+"-proc"); err != nil {
					t.Fatal(err)
				}
			}
			if q, err := c.QueryRefund(ctx, no, no+"-proc"); err != nil || q.State != channel.StateRefunded {
				t.Fatalf("query of the settled refund: %+v, %v", q, err)
			}

			if tv, _ := sim.Trade(kind, no); tv.RefundedMinor != 4000 {
				t.Fatalf("channel refunded %d, want 4000 (cut, slow, fail-then-retry, processing)", tv.RefundedMinor)
			}
			for _, n := range []string{"-cut", "-slow", "-no"} {
				if got := sim.RefundCalls(no + n); got != 1 {
					t.Fatalf("refund %s called %d times, want 1", n, got)
				}
			}
			if got := sim.RefundCalls(no + "-fail"); got != 2 {
				t.Fatalf("refund -fail called %d times, want 2", got)
			}
		})
	}
}

// TestChannelClientSignatures: the channel refuses requests not signed with
// the configured merchant key, and the client refuses answers not signed by
// the channel.
func TestChannelClientSignatures(t *testing.T) {
	t.Parallel()
	sim := startSim(t, paysim.Options{})
	other, err := paysim.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	otherPEM := pemPrivate(other)
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			ctx := ctxT(t)
			no := "S" + string(kind)
			sim.Create(kind, no, 100, "CNY")
			before := sim.RejectedRequests()
			cfg := sim.Config(kind)
			cfg.MerchantKeyPEM = otherPEM
			_, err := newChannel(t, cfg).Client.QueryPayment(ctx, no)
			if !errors.Is(err, channel.ErrRejected) && !errors.Is(err, channel.ErrUnknownOutcome) {
				t.Fatalf("request signed with another key: %v", err)
			}
			if sim.RejectedRequests() != before+1 {
				t.Fatalf("channel rejected %d requests, want %d", sim.RejectedRequests(), before+1)
			}
			if sim.Queries(no) != 0 {
				t.Fatalf("a badly signed query was answered")
			}
		})
	}
	// Alipay: an answer that does not verify with the configured public key.
	cfg := sim.Config(channel.KindAlipay)
	cfg.PublicKeyPEM = pemPublic(other)
	_, err = newChannel(t, cfg).Client.QueryPayment(ctxT(t), "Salipay")
	wantErr(t, "alipay answer under the wrong public key", err, channel.ErrSignature)
	wantErr(t, "alipay answer under the wrong public key", err, channel.ErrUnknownOutcome)

	// WeChat: a platform certificate for the channel's serial but another
	// key, so the channel's genuine answers do not verify.
	wcfg := sim.Config(channel.KindWeChat)
	wcfg.PublicKeyPEM = forgedCert(t, sim.PlatformSerial(), other)
	sim.Create(channel.KindWeChat, "Sresp", 100, "CNY")
	_, err = newChannel(t, wcfg).Client.QueryPayment(ctxT(t), "Sresp")
	wantErr(t, "wechat answer under the wrong platform key", err, channel.ErrSignature)
	wantErr(t, "wechat answer under the wrong platform key", err, channel.ErrUnknownOutcome)

	// A channel that cannot be reached: unknown outcome, provably not sent.
	dead := startSim(t, paysim.Options{})
	for _, kind := range kinds {
		c := newChannel(t, dead.Config(kind)).Client
		_ = dead.Close()
		_, err := c.Refund(ctxT(t), channel.RefundRequest{OutTradeNo: "X", OutRefundNo: "X-1", AmountMinor: 1, TotalMinor: 1, Currency: "CNY"})
		wantErr(t, fmt.Sprintf("%s refund to a closed channel", kind), err, channel.ErrUnknownOutcome)
		wantErr(t, fmt.Sprintf("%s refund to a closed channel", kind), err, channel.ErrNotSent)
	}
}
