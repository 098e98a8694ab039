package payment

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/keelevents/eventsweb"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/server/auth"
)

// TestPaymentBrowser drives Chromium through Keel's real server: a paid
// payment's detail with its state history and callback evidence, a partial
// refund from its form confirmed by the channel, then the discrepancy of
// money taken for a closed order: requested by one operator, approved and
// executed by another on the reconciliation pages.
// It runs once per dialect, the two at the same time.
func TestPaymentBrowser(t *testing.T) {
	browsertest.Both(t, testLines, moduletest.With(newTenv[pgx.Tx], testPaymentBrowser[pgx.Tx]),
		moduletest.With(newTenv[*sql.Tx], testPaymentBrowser[*sql.Tx]))
}

func testPaymentBrowser[TTx any](t *testing.T, e *tenv[TTx]) {
	e.start(t, startOpts{noSweep: true, settings: map[string]string{"payment.pay_timeout": "1m"}})
	ctx := context.Background()
	const paid, late = "WEB0000001", "WEB0000002"
	e.paid(t, channel.KindWeChat, paid, 128800)
	e.pay(t, channel.KindWeChat, late, 200000, "CNY")
	moduletest.WaitFor(t, 10*time.Second, "the timeout", func() bool { p, _ := e.m.Payment(ctx, late); return time.Now().After(p.ExpiresAt) })
	if st, err := e.m.QueryPayment(ctx, late); err != nil || st != PayClosed {
		t.Fatalf("close: %s %v", st, err)
	}
	if err := e.sim.PayWithoutCallback(channel.KindWeChat, late); err != nil {
		t.Fatal(err)
	}
	e.settled(t, paid)
	if _, err := e.m.FetchBill(ctx, channel.KindWeChat, time.Now()); err != nil {
		t.Fatal(err)
	}
	e.run(t, ReconChannel)
	dd := e.open(t, ReconChannel)["pay:"+late]
	if dd == nil {
		t.Fatal("no discrepancy")
	}
	ew, err := eventsweb.New(&eventsweb.Config[TTx]{Recon: e.recon, Events: e.ev})
	if err != nil {
		t.Fatal(err)
	}
	srv := browsertest.ServeEnv(t, e.Env, e.client, e.m, ew)
	base := srv.Base
	br := srv.Session("alice", auth.RoleOperator, 120*time.Second)
	br.Do("payments", chromedp.Navigate(base+"/payments"), chromedp.WaitVisible(chromedp.CSS("#payments")))
	br.MustSee("payments", "main", "支付单", paid, "支付成功", "已关闭", "1,288.00 CNY")
	br.Do("detail", chromedp.Navigate(base+"/payments/"+paid), chromedp.WaitVisible(chromedp.CSS("#callbacks")))
	br.MustSee("detail", "main", "状态历史", "待支付", "回调证据", "已生效", "账务分录", "支付入账")
	br.Do("refund", chromedp.SendKeys(chromedp.CSS("#refund-amount"), "88.00"), chromedp.Click(chromedp.CSS("#refund-submit")))
	br.Confirm("refund: reason", "少发一件配件", "main .flash")
	br.MustSee("refund sent", "main .flash", "已发起退款", paid+"R01")
	moduletest.WaitFor(t, 30*time.Second, "the refund confirmed", func() bool { return e.refundState(t, paid+"R01") == RefundDone })
	br.Do("refund done", chromedp.Navigate(base+"/payments/"+paid), chromedp.WaitVisible(chromedp.CSS("#refunds")))
	br.MustSee("refund done", "#refunds", "已退款", "88.00 CNY")
	br.Do("shot", br.Shot("payment-detail-refunded"))

	dPath := "/recon/discrepancies/" + itoa(int(dd.ID))
	br.Do("discrepancy", chromedp.Navigate(base+dPath), chromedp.WaitVisible(chromedp.CSS("#evidence")))
	br.MustSee("discrepancy", "main", "状态不符", "2,000.00 CNY")
	br.Do("request", chromedp.Click(chromedp.CSS("button.request")))
	br.Confirm("request", "渠道已收款而订单已关闭, 申请原路退款", `#d-state[data-state="awaiting_approval"]`)
	br.CheckConsole()

	b2 := srv.Session("bob", auth.RoleOperator, 120*time.Second)
	b2.Do("bob opens", chromedp.Navigate(base+dPath), chromedp.WaitVisible(chromedp.CSS("button.approve")))
	b2.Do("approve", chromedp.Click(chromedp.CSS("button.approve")))
	b2.Confirm("approve", "核对渠道账单一致, 同意退款", `#d-state[data-state="approved"]`)
	b2.Do("execute", chromedp.Click(chromedp.CSS("button.execute")))
	b2.Confirm("execute", "执行已批准的原路退款", `#d-state[data-state="executed"]`)
	b2.Do("shot", b2.Shot("payment-discrepancy-executed"))
	b2.CheckConsole()
	moduletest.WaitFor(t, 30*time.Second, "the compensation's refund at the channel", func() bool {
		rs, _ := e.m.Refunds(ctx, RefundDone, late, "", 10)
		return len(rs) == 1 && e.sim.RefundCalls(rs[0].RefundNo) == 1
	})
	// Executed, or already verified: a reconciliation run after the refund
	// confirms the repair and moves it on (on a loaded machine the refund
	// can take long enough for one to run).
	if d, _ := e.recon.GetDiscrepancy(ctx, dd.ID); d.State != keelrecon.StateExecuted && d.State != keelrecon.StateVerified {
		t.Fatalf("discrepancy %s", d.State)
	}
}
