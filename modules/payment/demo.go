package payment

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/paysim"
)

// demo is keel dev's outside world: the channel simulator and a callback
// receiver of the module's own on loopback (the simulator must know where
// to call before the server's address is known to the module).
type demo struct {
	sim  *paysim.Sim
	srv  *http.Server
	err  atomic.Value // the demo data's failure, if any (error)
	done atomic.Bool
}

func (m *Module[TTx]) startDemo(ctx context.Context) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("payment demo: %w", err)
	}
	srv := &http.Server{Handler: m.CallbackHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	sim, err := paysim.Start(context.WithoutCancel(ctx), paysim.Options{TimeScale: 3600, ClientTimeout: 3 * time.Second,
		NotifyURL: map[channel.Kind]string{channel.KindWeChat: base + CallbackPath(channel.KindWeChat),
			channel.KindAlipay: base + CallbackPath(channel.KindAlipay)}})
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("payment demo: %w", err)
	}
	m.demo = &demo{sim: sim, srv: srv}
	for _, k := range []channel.Kind{channel.KindWeChat, channel.KindAlipay} {
		cfg := sim.Config(k)
		ch, err := channel.New(ctx, cfg)
		if err != nil {
			return fmt.Errorf("payment demo: %w", err)
		}
		m.AddMerchant(Merchant{Kind: k, MerchantID: cfg.MerchantID, AppID: cfg.AppID, Channel: ch})
	}
	m.Life.Go(m.runDemo)
	m.Log.Info("payment demo: channel simulator running", "wechat", sim.URL(channel.KindWeChat), "alipay", sim.URL(channel.KindAlipay))
	return nil
}

// runDemo makes the demo's data: paid orders (one by five concurrent
// callbacks), one pending, partial refunds (one whose channel answer
// times out, found by query), a late success after close, and a bill with
// an amount discrepancy, reconciled.
func (m *Module[TTx]) runDemo(ctx context.Context) {
	if err := m.demoData(keel.WithActor(ctx, "system:demo")); err != nil && ctx.Err() == nil {
		m.demo.err.Store(err)
		m.Log.Warn("payment demo", "err", err)
	}
	m.demo.done.Store(true)
}

func (m *Module[TTx]) demoData(ctx context.Context) error {
	sim := m.demo.sim
	stamp := time.Now().UTC().Format("0102150405")
	no := func(i int) string { return fmt.Sprintf("DEMO%s%02d", stamp, i) }
	type order struct {
		kind   channel.Kind
		amount int64
	}
	orders := []order{{channel.KindWeChat, 128800}, {channel.KindAlipay, 39900}, {channel.KindWeChat, 5600},
		{channel.KindAlipay, 250000}, {channel.KindWeChat, 9900}, {channel.KindWeChat, 1999}}
	for i, o := range orders {
		if _, err := m.CreatePayment(ctx, NewPayment{PaymentNo: no(i), OrderID: "ORD" + no(i)[4:], Channel: string(o.kind),
			AmountMinor: o.amount, Currency: "CNY"}); err != nil {
			return err
		}
		sim.Create(o.kind, no(i), o.amount, "CNY")
	}
	sim.Duplicate(5)
	for i := 0; i < 4; i++ {
		if err := sim.Pay(orders[i].kind, no(i)); err != nil {
			return err
		}
	}
	if !m.demoWait(ctx, func() bool {
		for i := 0; i < 4; i++ {
			if p, err := m.Payment(ctx, no(i)); err != nil || p.State != PayPaid {
				return false
			}
		}
		return true
	}) {
		return errors.New("demo payments were not confirmed")
	}
	// Partial refunds; the second's answer times out (outcome unknown),
	// and a query finds it executed.
	sim.RefundBehaviour(no(0)+"R02", paysim.ExecuteThenTimeout)
	if _, err := m.CreateRefund(ctx, no(0), RefundRequest{RequestID: "demo-1", AmountMinor: 20000, Reason: "少发配件"}); err != nil {
		return err
	}
	if _, err := m.CreateRefund(ctx, no(0), RefundRequest{RequestID: "demo-2", AmountMinor: 8800, Reason: "运费补偿"}); err != nil {
		return err
	}
	// A late success: closed after the channel said unpaid, then paid.
	if _, err := m.closeAfterQuery(ctx, no(5)); err != nil {
		return err
	}
	if err := sim.Pay(channel.KindWeChat, no(5)); err != nil {
		return err
	}
	// A discrepancy for reconciliation: the channel's bill says 1 fen more.
	if err := sim.BillAmount(channel.KindAlipay, no(1), 1); err != nil {
		return err
	}
	m.demoWait(ctx, func() bool { r, err := m.Refund(ctx, no(0)+"R02"); return err == nil && r.State == RefundDone })
	for _, k := range []channel.Kind{channel.KindWeChat, channel.KindAlipay} {
		if _, err := m.FetchBill(ctx, k, time.Now()); err != nil {
			return err
		}
	}
	if m.recon != nil {
		_, err := m.recon.Run(keel.WithActor(ctx, keelrecon.SystemActor), ReconChannel, time.Now())
		return err
	}
	return nil
}

// closeAfterQuery closes a pending payment the way the timeout does,
// without waiting for the timeout (demo only).
func (m *Module[TTx]) closeAfterQuery(ctx context.Context, no string) (bool, error) {
	cl, err := m.channelOf(&Payment{Channel: string(channel.KindWeChat)})
	if err != nil {
		return false, err
	}
	n, err := cl.QueryPayment(ctx, no)
	if err != nil || n.State != channel.StateNotPaid {
		return false, fmt.Errorf("demo close of %s: %v", no, err)
	}
	if err := cl.ClosePayment(ctx, no); err != nil {
		return false, err
	}
	return m.closePayment(ctx, no, "demo: channel confirmed unpaid and closed")
}

func (m *Module[TTx]) demoWait(ctx context.Context, cond func() bool) bool {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond): // keel dev's demo data, not a test
		}
	}
	return false
}

func (m *Module[TTx]) stopDemo() error {
	if m.demo == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := m.demo.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// A callback still in flight after the bound (its write waiting
		// for the database while everything else stops) is cut off, not
		// waited for and not a failed stop: a channel retries a
		// notification it got no answer to, and the handler is idempotent.
		// Info, not a warning: nothing failed.
		m.Log.Info("payment demo: callbacks still in flight at stop were cut off; the channel sends them again")
		err = m.demo.srv.Close()
	}
	return errors.Join(err, m.demo.sim.Close())
}
