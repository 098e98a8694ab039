package eventsweb_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelrecon"
)

// TestReconConsoleInBrowser drives Chromium through every page of the
// surface in Chinese and in English on Keel's real server, with a
// discrepancy made by the test reconciler: alice requests approval (and
// sees she cannot decide it herself), bob approves it from his queue and
// executes it, a run started from the console verifies the fix. No page
// reports a console error.
func TestReconConsoleInBrowser(t *testing.T) {
	t.Parallel()
	s := serveSQLite(t)
	s.seed()
	s.seedEvents()
	var manual list[keelevents.ManualEvent]
	s.call("vera", "GET", "/api/v1/events/manual", nil, &manual)
	mPath := fmt.Sprintf("/events/manual/%d", manual.Data[0].ID)
	var run keelrecon.Run
	if st, raw := s.call("alice", "POST", "/api/v1/recon/runs", map[string]any{"reconciler": "ledger"}, &run); st != 201 {
		t.Fatalf("run: %d %s", st, raw)
	}
	var ds list[*keelrecon.DiscrepancyRow]
	s.call("vera", "GET", "/api/v1/recon/discrepancies?class=amount_mismatch", nil, &ds)
	big := ds.Data[0].ID
	dPath := fmt.Sprintf("/recon/discrepancies/%d", big)
	runPath := fmt.Sprintf("/recon/runs/%d", run.ID)

	alice := browsertest.New(t, 90*time.Second)
	alice.Login(s.base, s.tokens["alice"])
	pages := []struct{ name, path, sel, zh, en string }{
		{"recon-runs", "/recon/runs", "#runs", "已完成", "Succeeded"},
		{"recon-run", runPath, "#totals", "金额不符", "Amount mismatch"},
		{"recon-discrepancies", "/recon/discrepancies", "#discrepancies", "未对平", "Open"},
		{"recon-discrepancy", dPath, "#evidence", "渠道", "Channel"},
		{"approvals", "/approvals", "#approvals-awaiting", "没有等待您审批的申请", "Nothing awaits your decision"},
		{"events", "/events", "#consumers", "重复已吸收", "Duplicates absorbed"},
		{"events-quarantine", "/events/quarantine", "#quarantine", "新收到的内容", "Received payload"},
		{"events-manual", "/events/manual", "#manual", "待人工处理", "Waiting"},
		{"events-manual-one", mPath, "#manual-event", "SKU 映射缺失", "SKU 映射缺失"},
		{"events-event", "/events/event?topic=stock.reserved&id=r-ok", "#inbox", "已应用", "Applied"},
	}
	for _, lang := range []string{"zh", "en"} {
		for _, p := range pages {
			want := p.zh
			if lang == "en" {
				want = p.en
			}
			sep := "?"
			if strings.Contains(p.path, "?") {
				sep = "&"
			}
			alice.Do("open "+p.name+" "+lang, chromedp.Navigate(s.base+p.path+sep+"lang="+lang),
				chromedp.WaitVisible(chromedp.CSS(p.sel)), alice.Shot(p.name+"-"+lang))
			alice.MustSee(p.name+" "+lang, "main", want)
		}
	}
	alice.Do("events overview", chromedp.Navigate(s.base+"/events?lang=zh"), chromedp.WaitVisible(chromedp.CSS("#topics")))
	alice.MustSee("topics", "#topics", "stock.reserved")
	alice.MustSee("consumers", `#consumers tr[data-consumer="stock"]`, "stock.reserved")
	// Replay a manual event: refused while its handler still fails, then
	// replayed with its original id.
	alice.Do("manual event", chromedp.Navigate(s.base+mPath+"?lang=zh"), chromedp.WaitVisible(chromedp.CSS("button.replay")))
	alice.MustSee("payload fields", "main", "sku", "B-200", "qty")
	alice.Do("replay while failing", chromedp.Click(chromedp.CSS("button.replay")))
	alice.Confirm("replay while failing", "再试一次映射", "p.err")
	alice.MustSee("replay failed", "main", "重放失败")
	s.feed.Poisoned.Store(false)
	alice.Do("replay", chromedp.Click(chromedp.CSS("button.replay")))
	alice.Confirm("replay", "SKU 映射已修复", `#manual-state[data-manual-state="replayed"]`)
	alice.MustSee("replayed", "#manual-state", "已重放")
	alice.Do("back to Chinese", chromedp.Navigate(s.base+"/recon/discrepancies?lang=zh"), chromedp.WaitVisible(chromedp.CSS("#discrepancies")))
	alice.MustSee("discrepancy words", "#discrepancies", "我方缺失", "对方缺失", "金额不符", "已自动修复", "需双人审批", "500.00 CNY")
	alice.MustSee("times with their zone", "#discrepancies", "北京时间")

	// The evidence side by side, field by field; the amounts differ.
	alice.Do("open the discrepancy", chromedp.Navigate(s.base+dPath), chromedp.WaitVisible(chromedp.CSS("#evidence")))
	alice.MustSee("evidence header", "#evidence thead", "字段", "我方", "渠道")
	alice.MustSee("evidence amount", `#evidence tr[data-field="amount"]`, "100.00 CNY", "600.00 CNY", "不一致")
	alice.MustSee("impact", "#d-impact", "500.00 CNY")
	alice.Do("request approval", chromedp.Click(chromedp.CSS("button.request")))
	alice.Confirm("request approval", "渠道对账单显示 600.00 元", `#d-state[data-state="awaiting_approval"]`)
	alice.MustSee("awaiting", "#d-state", "待审批")
	alice.MustSee("no self-approval", "#actions", "这是您提交的申请，需由另一位操作员审批。")
	if n := countNodes(t, alice, "button.approve"); n != 0 {
		t.Fatalf("the requester is offered %d approve buttons", n)
	}
	alice.Shot("recon-discrepancy-awaiting")

	bob := browsertest.New(t, 90*time.Second)
	bob.Login(s.base, s.tokens["bob"])
	bob.MustSee("bob's badge", "header nav", "待我审批")
	bob.Do("bob's queue", chromedp.Navigate(s.base+"/approvals"), chromedp.WaitVisible(chromedp.CSS("#approvals-awaiting")), bob.Shot("approvals-bob"))
	bob.MustSee("bob's queue", "#approvals-awaiting", "对账差异处理", "按渠道金额调整", "500.00 CNY", "令牌 alice")
	bob.Do("open from the queue", chromedp.Navigate(s.base+dPath), chromedp.WaitVisible(chromedp.CSS("button.approve")))
	bob.Do("approve", chromedp.Click(chromedp.CSS("button.approve")))
	bob.Confirm("approve", "与渠道对账单核对一致", `#d-state[data-state="approved"]`)
	bob.MustSee("approved", "#approval", "已批准", "令牌 bob", "与渠道对账单核对一致")
	bob.Do("execute", chromedp.Click(chromedp.CSS("button.execute")))
	bob.Confirm("execute", "执行已批准的金额调整", `#d-state[data-state="executed"]`)
	bob.MustSee("executed", "#d-state", "已执行")
	bob.Do("run now", chromedp.Navigate(s.base+"/recon/runs"), chromedp.Click(chromedp.CSS(`tr[data-reconciler="ledger"] button.run-now`)))
	bob.Confirm("run now", "", "#totals")
	bob.Do("verified", chromedp.Navigate(s.base+dPath), chromedp.WaitVisible(chromedp.CSS(`#d-state[data-state="verified"]`)), bob.Shot("recon-discrepancy-verified"))
	bob.MustSee("verified", "#d-state", "已核实")
	bob.Do("english", chromedp.Navigate(s.base+dPath+"?lang=en"), chromedp.WaitVisible(chromedp.CSS("#evidence")))
	bob.MustSee("english words", "main", "Verified", "Evidence side by side", "Amount mismatch", "500.00 CNY")
	bob.Do("recent approvals", chromedp.Navigate(s.base+"/approvals?lang=zh"), chromedp.WaitVisible(chromedp.CSS("#approvals-recent")))
	bob.MustSee("recent approvals", "#approvals-recent", "已执行", "令牌 bob")

	ap := 0
	for _, l := range []string{"approval.request", "approval.approve", "approval.execute", "recon.discrepancy.execute", "recon.discrepancy.verify"} {
		if s.audits(l) == 0 {
			t.Errorf("no audit entry %s", l)
		}
		ap++
	}
	if n := s.fixes(fmt.Sprintf("recon/%d/1", big)); n != 1 {
		t.Fatalf("fix applied %d times", n)
	}
	alice.CheckConsole()
	bob.CheckConsole()
}

func countNodes(t *testing.T, b *browsertest.Browser, sel string) int {
	t.Helper()
	n, err := chromedp.Run(b.Ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+"`"+strings.ReplaceAll(sel, "`", "")+"`"+`).length`))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
