package payment

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/payment/channel"
)

// TestPaymentCommands runs `keel payments` against the module's API with
// the channel simulator as the counterpart: the list and a payment's
// detail in words, money in yuan with its currency and times with their
// zone; `query` asks the channel about a payment whose callback never came
// and finds it paid (the channel counted the query); `refund` refunds part
// of a payment once at the channel even when the operator runs it twice
// with the same --request; `refunds`, `bill` and `health` answer. Bad input
// is refused with a sentence before anything is sent.
func TestPaymentCommands(t *testing.T) { each(t, testCommands, testCommands) }

func testCommands[TTx any](t *testing.T, e *tenv[TTx]) {
	e.start(t, startOpts{noSweep: true, settings: map[string]string{"payment.pay_timeout": "1h"}})
	ctx := context.Background()
	const paid, silent = "CLI0000001", "CLI0000002"
	e.paid(t, channel.KindWeChat, paid, 128800)
	e.pay(t, channel.KindAlipay, silent, 9900, "CNY")
	// The buyer pays, but the channel's callback is lost: only a query
	// can tell.
	if err := e.sim.PayWithoutCallback(channel.KindAlipay, silent); err != nil {
		t.Fatal(err)
	}
	caller := &moduletest.HTTPCaller{Base: moduletest.ServeAPI(t, e.m.Routes(), "ops").URL}
	cli := &moduletest.CLI{API: caller, Verbs: Commands}
	run := func(args ...string) string {
		t.Helper()
		out, err := cli.Run(ctx, args...)
		if err != nil {
			t.Fatalf("keel %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	match := func(what, out, re string) {
		t.Helper()
		if !regexp.MustCompile(re).MatchString(out) {
			t.Fatalf("%s: no line matching %s in\n%s", what, re, out)
		}
	}
	const when = `\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\S*`

	out := run("payments", "list")
	match("list", out, `(?m)^`+paid+`\s+O`+paid+`\s+wechat\s+1,288\.00 CNY\s+paid\s+0\.00 CNY\s+`+when+`$`)
	match("list", out, `(?m)^`+silent+`\s+O`+silent+`\s+alipay\s+99\.00 CNY\s+awaiting payment\s+0\.00 CNY\s+`+when+`$`)
	if out = run("payments", "list", "--state", "paid"); strings.Contains(out, silent) || !strings.Contains(out, paid) {
		t.Fatalf("list --state paid:\n%s", out)
	}

	queries := e.sim.Queries(silent)
	out = run("payments", "query", silent)
	if out != silent+" is paid\n" {
		t.Fatalf("query: %q; want it paid", out)
	}
	if e.sim.Queries(silent) <= queries {
		t.Fatal("query answered without asking the channel")
	}
	if st := e.state(t, silent); st != PayPaid {
		t.Fatalf("after the query the payment is %s", st)
	}

	out = run("payments", "get", paid)
	match("get", out, `(?m)^Amount\s+1,288\.00 CNY$`)
	match("get", out, `(?m)^State\s+paid$`)
	match("get", out, `(?m)^Paid\s+`+when+`$`)
	match("get", out, `(?m)^\d+\s+awaiting payment\s+paid\s+`)
	match("get", out, `(?m)^RECEIVED\s+OUTCOME\s+TRANSACTION\s+AMOUNT\s+SHA-256$`)
	match("get", out, `(?m)^`+when+`\s+\S.*1,288\.00 CNY`)
	if out = run("payments", "get", paid, "--json"); !json.Valid([]byte(out)) || !strings.Contains(out, `"amount_minor":128800`) {
		t.Fatalf("get --json: %s", out)
	}

	// A partial refund, run twice with the same request: one refund, one
	// call at the channel.
	out = run("payments", "refund", paid, "--amount", "288.00", "--request", "cli-r1", "--reason", "少发一件配件")
	match("refund", out, `^refund `+paid+`R01 of 288\.00 CNY: `)
	moduletest.WaitFor(t, 30*time.Second, "the refund confirmed", func() bool { return e.refundState(t, paid+"R01") == RefundDone })
	out = run("payments", "refund", paid, "--amount", "288.00", "--request", "cli-r1")
	match("refund again", out, `^refund `+paid+`R01 of 288\.00 CNY: refunded`)
	if n := e.sim.RefundCalls(paid + "R01"); n != 1 {
		t.Fatalf("the channel received %d refund requests for %sR01; want 1", n, paid)
	}
	out = run("payments", "refunds", "--payment", paid)
	match("refunds", out, `(?m)^`+paid+`R01\s+`+paid+`\s+288\.00 CNY\s+refunded\s+1/\d+\s+`+when+`$`)
	if strings.Count(out, paid+"R01") != 1 {
		t.Fatalf("refunds lists the refund more than once:\n%s", out)
	}
	match("list after the refund", run("payments", "list"), `(?m)^`+paid+`\s.*\s288\.00 CNY\s+`+when+`$`)

	day := time.Now().In(billZone).Format(time.DateOnly)
	match("bill", run("payments", "bill", "wechat", day), `^wechat bill of `+day+`: \d+ lines kept; run `)
	out = run("payments", "health")
	match("health", out, `(?m)^Pending payments\s+0$`)
	match("health", out, `(?m)^Refused callbacks\s+0$`)

	// Unknown: a sentence naming it.
	if _, err := cli.Run(ctx, "payments", "get", "NOPE000001"); err == nil || err.Error() != "no payment NOPE000001 (payment_not_found)" {
		t.Fatalf("unknown payment: %v", err)
	}
	sent := caller.Sent()
	calls := e.sim.RefundCalls(paid + "R02")
	for _, args := range [][]string{
		{"payments", "get", "x"},
		{"payments", "get", "has spaces 1"},
		{"payments", "list", "--state", "refunded-ish"},
		{"payments", "refunds", "--state", "nope"},
		{"payments", "refunds", "--payment", "x"},
		{"payments", "refund", paid, "--amount", "1.234", "--request", "cli-r2"},
		{"payments", "refund", paid, "--amount", "-1", "--request", "cli-r2"},
		{"payments", "refund", paid, "--amount", "0", "--request", "cli-r2"},
		{"payments", "refund", paid, "--amount", "1.00"},
		{"payments", "refund", paid, "--amount", "1.00", "--request", "has spaces"},
		{"payments", "bill", "paypal", day},
		{"payments", "bill", "wechat", "03/12/2026"},
		{"payments", "query"},
		{"payments", "nonsense"},
	} {
		if _, err := cli.Run(ctx, args...); err == nil {
			t.Errorf("keel %s: no error", strings.Join(args, " "))
		} else if msg := err.Error(); strings.Contains(msg, "{") || len(msg) < 10 {
			t.Errorf("keel %s: %q is not a sentence", strings.Join(args, " "), msg)
		}
	}
	if caller.Sent() != sent {
		t.Fatalf("bad input sent %d requests", caller.Sent()-sent)
	}
	if e.sim.RefundCalls(paid+"R02") != calls {
		t.Fatal("bad input reached the channel")
	}
}
