package inventory

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/server/auth"
)

// TestInventoryBrowser drives Chromium through Keel's real server: the
// stock page, a reservation's detail with its history, its conflict (a
// confirm that arrived after the release), a resolution by an adjustment
// over the threshold, the requester's own approval refused in words, and
// a second operator's approval booking it.
func TestInventoryBrowser(t *testing.T) {
	e := newTenv(browsertest.PostgresEnv(t, testLines))
	m := e.build(t, map[string]string{"inventory.approval_minor": "1000"})
	e.start(t)
	seed(t, m, "WH1", "SKU1", 20)
	res, late := lateConflict(t, m, "WEB-1")
	srv := browsertest.ServeEnv(t, e.Env, e.client, m)
	base := srv.Base
	br := srv.Session("alice", auth.RoleOperator, 90*time.Second)
	br.Do("stock", chromedp.Navigate(base+"/inventory"), chromedp.WaitVisible(chromedp.CSS(`tr[data-stock="WH1/SKU1"]`)))
	br.MustSee("stock", "main", "库存", "展示可用（非承诺）", "不作为成交承诺")
	br.Do("to reservations", chromedp.Click(chromedp.CSS(`tr[data-stock="WH1/SKU1"] a`)), chromedp.WaitVisible(chromedp.CSS(`a[href="/inventory/reservations?state=released"]`)))
	rpath := fmt.Sprintf("/inventory/reservations/%d", res.ReservationID)
	br.Do("reservation detail", chromedp.Navigate(base+"/inventory/reservations"),
		chromedp.Click(chromedp.CSS(`a[href="`+rpath+`"]`)), chromedp.WaitVisible(chromedp.CSS("dd.state")))
	br.MustSee("reservation detail", "main", "已释放", "状态历史", "库存流水", "释放后到达的出库确认")
	// The history and the ledger say the module's texts in words, the
	// stored text only in the hover title, in both languages.
	br.MustSee("reasons in words", "main", "订单行 WEB-1", "库存版本 ", "取消：cancel")
	if text := br.Text("reasons", "main"); strings.Contains(text, "order line") || strings.Contains(text, "stock version") {
		t.Errorf("the reservation page shows the stored English texts:\n%s", text)
	}
	br.Do("reservation in English", chromedp.Navigate(base+"/?lang=en"), chromedp.WaitVisible(chromedp.CSS("header nav")),
		chromedp.Navigate(base+rpath), chromedp.WaitVisible(chromedp.CSS("dd.state")), br.Shot("inventory-reservation-en"))
	br.MustSee("reasons in English", "main", "order line WEB-1", "stock version ", "cancelled: cancel")
	br.Do("back to Chinese", chromedp.Navigate(base+"/?lang=zh"), chromedp.WaitVisible(chromedp.CSS("header nav")),
		chromedp.Navigate(base+rpath), chromedp.WaitVisible(chromedp.CSS("dd.state")))
	cpath := fmt.Sprintf("/inventory/conflicts/%d", late.ConflictID)
	br.Do("conflict", chromedp.Click(chromedp.CSS(`a[href="`+cpath+`"]`)), chromedp.WaitVisible(chromedp.CSS("#resolve")))
	br.MustSee("conflict", "main", "证据", "SHIP-1", "待处理")
	br.Do("resolve", chromedp.SendKeys(chromedp.CSS(`#resolve input[name="delta"]`), "-4"),
		chromedp.Click(chromedp.CSS(`#resolve button[type="submit"]`)))
	br.Confirm("resolve: reason", "货已发出，按实际出库调整", "#approve")
	br.MustSee("awaiting", "main", "等待第二人审批")
	br.Do("self-approval", chromedp.Click(chromedp.CSS(`#approve button[type="submit"]`)))
	br.Confirm("self-approval: reason", "我自己批准", "main .err")
	br.MustSee("self-approval refused", "main .err", "不能审批自己提交的调整")
	br.Do("shot", br.Shot("inventory-conflict-awaiting"))
	br.CheckConsole()

	br2 := srv.Session("bob", auth.RoleOperator, 90*time.Second)
	br2.Do("bob opens the conflict", chromedp.Navigate(base+cpath), chromedp.WaitVisible(chromedp.CSS("#approve")))
	br2.Do("bob approves", chromedp.Click(chromedp.CSS(`#approve button[type="submit"]`)))
	br2.Confirm("bob: reason", "已核对出库回执", "main .flash")
	br2.MustSee("resolved", "main", "已完成", "已处理")
	br2.Do("shot", br2.Shot("inventory-conflict-resolved"))
	br2.CheckConsole()
	if av, _, _ := stock(t, e, "WH1", "SKU1"); av != 16 {
		t.Fatalf("available %d after the approved adjustment; want 16", av)
	}
}
