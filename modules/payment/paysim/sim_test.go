package paysim_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/paysim"
)

// receiver is Keel's side of the callbacks for these tests: a real server
// on loopback verifying with the real verifiers, failing the first
// failFirst callbacks, recording the order of verified trades.
type receiver struct {
	failFirst atomic.Int64
	mu        sync.Mutex
	order     []string
	verified  map[string]int
	bad       int
}

func startReceiver(t *testing.T) (*receiver, *paysim.Sim) {
	t.Helper()
	rc := &receiver{verified: map[string]int{}}
	var verifiers sync.Map
	mux := http.NewServeMux()
	for _, kind := range []channel.Kind{channel.KindWeChat, channel.KindAlipay, channel.KindStripe} {
		mux.HandleFunc("POST /notify/"+string(kind), func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			vv, _ := verifiers.Load(kind)
			v := vv.(channel.Verifier)
			n, err := v.Verify(r.Context(), r.Header, body)
			if err != nil {
				rc.mu.Lock()
				rc.bad++
				rc.mu.Unlock()
				v.Fail(w, http.StatusUnauthorized, err.Error())
				return
			}
			if rc.failFirst.Add(-1) >= 0 {
				v.Fail(w, http.StatusInternalServerError, "busy")
				return
			}
			rc.mu.Lock()
			rc.order = append(rc.order, n.OutTradeNo)
			rc.verified[n.OutTradeNo]++
			rc.mu.Unlock()
			v.Ack(w)
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	sim, err := paysim.Start(context.Background(), paysim.Options{TimeScale: 1000, NotifyURL: map[channel.Kind]string{
		channel.KindWeChat: srv.URL + "/notify/wechat", channel.KindAlipay: srv.URL + "/notify/alipay",
		channel.KindStripe: srv.URL + "/notify/stripe"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	for _, kind := range []channel.Kind{channel.KindWeChat, channel.KindAlipay, channel.KindStripe} {
		ch, err := channel.New(context.Background(), sim.Config(kind))
		if err != nil {
			t.Fatal(err)
		}
		verifiers.Store(kind, ch.Verifier)
	}
	return rc, sim
}

func (rc *receiver) seen(no string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.verified[no]
}

// TestSimCallbackRetries: callbacks repeat on the (scaled) schedule until
// Keel acknowledges, then stop.
func TestSimCallbackRetries(t *testing.T) {
	t.Parallel()
	for _, kind := range []channel.Kind{channel.KindWeChat, channel.KindAlipay, channel.KindStripe} {
		t.Run(string(kind), func(t *testing.T) {
			rc, sim := startReceiver(t)
			rc.failFirst.Store(3)
			no := "R" + string(kind)
			sim.Create(kind, no, 128800, "CNY")
			if err := sim.Pay(kind, no); err != nil {
				t.Fatal(err)
			}
			moduletest.WaitFor(t, 60*time.Second, "the callback acknowledged", func() bool { return sim.Acks(no) == 1 })
			if got := sim.CallbacksSent(no); got != 4 {
				t.Fatalf("%d callbacks sent, want 4 (3 failed, 1 acknowledged)", got)
			}
			// Each verified delivery was acknowledged once; none failed verification.
			if rc.seen(no) != 1 || rc.bad != 0 {
				t.Fatalf("receiver verified %d, rejected %d", rc.seen(no), rc.bad)
			}
			if err := sim.Pay(kind, no); err == nil {
				t.Fatal("paying a paid trade again succeeded")
			}
		})
	}
}

// TestSimDuplicateReorderLose exercises the misbehaviour knobs.
func TestSimDuplicateReorderLose(t *testing.T) {
	t.Parallel()
	rc, sim := startReceiver(t)
	k := channel.KindWeChat
	for _, no := range []string{"D1", "A1", "B1", "L1"} {
		sim.Create(k, no, 100, "CNY")
	}
	sim.Duplicate(5)
	if err := sim.Pay(k, "D1"); err != nil {
		t.Fatal(err)
	}
	moduletest.WaitFor(t, 30*time.Second, "five copies acknowledged", func() bool { return sim.Acks("D1") == 5 })
	if sim.CallbacksSent("D1") != 5 || rc.seen("D1") != 5 {
		t.Fatalf("duplicate: sent %d, received %d, want 5", sim.CallbacksSent("D1"), rc.seen("D1"))
	}

	sim.Reorder()
	if err := sim.Pay(k, "A1"); err != nil {
		t.Fatal(err)
	}
	if err := sim.Pay(k, "B1"); err != nil {
		t.Fatal(err)
	}
	moduletest.WaitFor(t, 30*time.Second, "both acknowledged", func() bool { return sim.Acks("A1") == 1 && sim.Acks("B1") == 1 })
	rc.mu.Lock()
	order := append([]string(nil), rc.order[5:]...)
	rc.mu.Unlock()
	if len(order) != 2 || order[0] != "B1" || order[1] != "A1" {
		t.Fatalf("order %v, want B1 before A1", order)
	}

	sim.LoseNext()
	if err := sim.Pay(k, "L1"); err != nil {
		t.Fatal(err)
	}
	moduletest.WaitFor(t, 30*time.Second, "the retry after the lost callback", func() bool { return sim.Acks("L1") == 1 })
	if sim.Lost("L1") != 1 || sim.CallbacksSent("L1") != 1 {
		t.Fatalf("lost %d, sent %d, want 1 and 1", sim.Lost("L1"), sim.CallbacksSent("L1"))
	}
}

// TestSimRefundCallbacks: with RefundCallbacks the channel notifies an
// executed refund until acknowledged.
func TestSimRefundCallbacks(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	var sim *paysim.Sim
	var v atomic.Value
	mux.HandleFunc("POST /n", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ver := v.Load().(channel.Verifier)
		if n, err := ver.Verify(r.Context(), r.Header, body); err != nil || n.Event != channel.EventRefund {
			ver.Fail(w, 400, "unexpected")
			return
		}
		ver.Ack(w)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	sim, err := paysim.Start(context.Background(), paysim.Options{TimeScale: 1000, RefundCallbacks: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	sim.SetNotifyURL(channel.KindWeChat, srv.URL+"/n")
	ch, err := channel.New(context.Background(), sim.Config(channel.KindWeChat))
	if err != nil {
		t.Fatal(err)
	}
	v.Store(ch.Verifier)
	sim.Create(channel.KindWeChat, "RC", 1000, "CNY")
	if err := sim.PayWithoutCallback(channel.KindWeChat, "RC"); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Client.Refund(context.Background(), channel.RefundRequest{OutTradeNo: "RC", OutRefundNo: "RC-1", AmountMinor: 10, TotalMinor: 1000, Currency: "CNY"}); err != nil {
		t.Fatal(err)
	}
	moduletest.WaitFor(t, 30*time.Second, "refund callback acknowledged", func() bool { return sim.RefundAcks("RC-1") == 1 })
}

// TestSimCloseStopsSenders: Close returns while callbacks wait hours for
// their next attempt and while a refund answer is being withheld.
func TestSimCloseStopsSenders(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }))
	t.Cleanup(srv.Close)
	sim, err := paysim.Start(context.Background(), paysim.Options{
		NotifyURL: map[channel.Kind]string{channel.KindWeChat: srv.URL, channel.KindAlipay: srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []channel.Kind{channel.KindWeChat, channel.KindAlipay} {
		sim.Create(kind, "C1", 100, "CNY")
		if err := sim.Pay(kind, "C1"); err != nil {
			t.Fatal(err)
		}
	}
	moduletest.WaitFor(t, 30*time.Second, "first attempts refused", func() bool { return sim.CallbacksSent("C1") == 2 })
	ch, err := channel.New(context.Background(), sim.Config(channel.KindWeChat))
	if err != nil {
		t.Fatal(err)
	}
	sim.RefundBehaviour("C1-1", paysim.ExecuteThenTimeout)
	done := make(chan error, 1)
	go func() {
		_, err := ch.Client.Refund(context.Background(), channel.RefundRequest{OutTradeNo: "C1", OutRefundNo: "C1-1", AmountMinor: 1, TotalMinor: 100, Currency: "CNY"})
		done <- err
	}()
	moduletest.WaitFor(t, 30*time.Second, "the refund call arrived", func() bool { return sim.RefundCalls("C1-1") == 1 })
	closed := make(chan struct{})
	go func() { _ = sim.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return")
	}
	if err := <-done; !errors.Is(err, channel.ErrUnknownOutcome) {
		t.Fatalf("withheld refund answer ended with %v, want outcome unknown", err)
	}
}
