package channel_test

import (
	"testing"

	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/paysim"
)

// TestChannelBillDiscrepancies downloads bills carrying one injected
// discrepancy of each class and checks the parsed lines show each.
func TestChannelBillDiscrepancies(t *testing.T) {
	t.Parallel()
	sim := startSim(t, paysim.Options{})
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			ctx := ctxT(t)
			c := newChannel(t, sim.Config(kind)).Client
			p := func(s string) string { return string(kind) + "-" + s }
			for _, no := range []string{"ok", "drop", "dup", "amt", "state", "plus", "minus"} {
				paidTrade(t, sim, kind, p(no), 10000)
			}
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(sim.InjectMissingOurs(kind, p("ours"), 4200, "CNY"))
			must(sim.BillDrop(kind, p("drop")))
			must(sim.BillDuplicate(kind, p("dup")))
			must(sim.BillAmount(kind, p("amt"), 500))
			must(sim.BillOffsettingPair(kind, p("plus"), p("minus")))
			stateErr := sim.BillState(kind, p("state"), channel.StateClosed)
			if kind == channel.KindAlipay {
				if stateErr == nil {
					t.Fatal("a status mismatch was accepted for a bill without a status column")
				}
			} else {
				must(stateErr)
			}
			lines, err := c.Bill(ctx, chinaDay())
			must(err)
			seen := map[string][]channel.BillLine{}
			var total int64
			for _, l := range lines {
				seen[l.OutTradeNo] = append(seen[l.OutTradeNo], l)
				total += l.AmountMinor
			}
			one := func(no string, amount int64, st channel.State) {
				t.Helper()
				if len(seen[no]) != 1 || seen[no][0].AmountMinor != amount || seen[no][0].State != st {
					t.Fatalf("%s: lines %+v, want one of %d %s", no, seen[no], amount, st)
				}
			}
			one(p("ok"), 10000, channel.StatePaid)
			one(p("ours"), 4200, channel.StatePaid)
			one(p("amt"), 10500, channel.StatePaid)
			one(p("plus"), 10001, channel.StatePaid)
			one(p("minus"), 9999, channel.StatePaid)
			if kind == channel.KindWeChat {
				one(p("state"), 10000, channel.StateClosed)
			} else {
				one(p("state"), 10000, channel.StatePaid)
			}
			if len(seen[p("drop")]) != 0 {
				t.Fatalf("dropped trade billed: %+v", seen[p("drop")])
			}
			if len(seen[p("dup")]) != 2 {
				t.Fatalf("duplicated trade billed %d times", len(seen[p("dup")]))
			}
			// ok, ours, dup×2, amt, state, plus, minus; the pair cancels out.
			if len(lines) != 8 || total != 10000+4200+20000+10500+10000+20000 {
				t.Fatalf("%d lines totalling %d", len(lines), total)
			}
			if got, err := c.QueryPayment(ctx, p("ours")); err != nil || got.State != channel.StatePaid {
				t.Fatalf("the trade missing on our side is not found by a query: %+v, %v", got, err)
			}
		})
	}
}
