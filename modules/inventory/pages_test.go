package inventory

import (
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/module"
)

// TestInventoryPages walks the console: stock (with the cached value
// marked as not a promise), the reservation's detail with its history,
// and a conflict resolved by an adjustment that needs a second approver:
// the requester's own approval is refused in words, another operator's
// books it.
func TestInventoryPages(t *testing.T) {
	each(t, testPages[pgx.Tx], testPages[*sql.Tx])
}

func testPages[TTx any](t *testing.T, e *tenv[TTx]) {
	m := e.build(t, map[string]string{"inventory.approval_minor": "1000"})
	e.start(t)
	seed(t, m, "WH1", "SKU1", 20)
	res, late := lateConflict(t, m, "W1-1")
	pages := map[string]module.Page{}
	for _, p := range m.Pages() {
		pages[p.Pattern] = p
	}
	mux := func(actor string) *http.ServeMux {
		mx := http.NewServeMux()
		for pat, p := range pages {
			h := p.Handle
			mx.HandleFunc(pat, func(w http.ResponseWriter, r *http.Request) {
				v := &module.View{Lang: "zh", CSRF: "tok", Actor: actor, Role: module.RoleAdmin,
					Flash: r.URL.Query().Get("flash"), Error: r.URL.Query().Get("err")}
				out, err := h(w, r, v)
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				if out != nil {
					_, _ = w.Write([]byte(out.Body))
				}
			})
		}
		return mx
	}
	get := func(actor, path string) string {
		t.Helper()
		rec := httptest.NewRecorder()
		mux(actor).ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String())
		}
		return rec.Body.String()
	}
	post := func(actor, path string, form url.Values) string {
		t.Helper()
		req := httptest.NewRequest("POST", path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		mux(actor).ServeHTTP(rec, req)
		if rec.Code != http.StatusSeeOther {
			t.Fatalf("POST %s: %d %s", path, rec.Code, rec.Body.String())
		}
		loc, _ := url.Parse(rec.Header().Get("Location"))
		// The console's layout shows the outcome carried by the redirect.
		return loc.Query().Get("flash") + loc.Query().Get("err") + get(actor, loc.RequestURI())
	}
	stockPage := get("alice", "/inventory")
	for _, want := range []string{"不作为成交承诺", "展示可用（非承诺）", "准入状态", "商品SKU1"} {
		if !strings.Contains(stockPage, want) {
			t.Errorf("stock page lacks %q", want)
		}
	}
	detail := get("alice", fmt.Sprintf("/inventory/reservations/%d", res.ReservationID))
	for _, want := range []string{"已释放", "状态历史", "库存流水", "释放后到达的出库确认"} {
		if !strings.Contains(detail, want) {
			t.Errorf("reservation page lacks %q", want)
		}
	}
	if strings.Contains(detail, "confirm_after_released") || strings.Contains(detail, ">released<") {
		t.Errorf("reservation page shows raw enums")
	}
	cpath := fmt.Sprintf("/inventory/conflicts/%d", late.ConflictID)
	page := post("alice", cpath+"/resolve", url.Values{"csrf": {"tok"}, "delta": {"-4"}, "reason": {"货已发出，按实际出库调整"}})
	if !strings.Contains(page, "等待第二人审批") || !strings.Contains(page, "/approve") {
		t.Fatalf("after the resolution request: %s", page)
	}
	i := strings.Index(page, "/inventory/approvals/")
	approve := page[i : i+strings.Index(page[i:], `"`)]
	page = post("alice", approve, url.Values{"csrf": {"tok"}, "reason": {"我自己批准"}, "back": {cpath}})
	if !strings.Contains(page, "不能审批自己提交的调整") {
		t.Fatalf("self-approval not refused in words: %s", page)
	}
	page = post("bob", approve, url.Values{"csrf": {"tok"}, "reason": {"已核对出库回执"}, "back": {cpath}})
	if !strings.Contains(page, "已完成") || !strings.Contains(page, "已处理") {
		t.Fatalf("after bob's approval: %s", page)
	}
	if av, _, _ := stock(t, e, "WH1", "SKU1"); av != 16 {
		t.Fatalf("available %d after the approved adjustment; want 16", av)
	}
}
