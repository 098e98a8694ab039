package export

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/server/auth"
)

// TestExportConsoleInBrowser drives Chromium through Keel's real server
// hosting the module, on PostgreSQL and on SQLite: an operator creates an
// export in the export centre, watches its progress bar move (half the
// shards are held until the page has shown a partial bar), sees the
// verification verdict, downloads the file and checks its SHA-256 and row
// count in the page, then finds the export's audit reason in words.
func TestExportConsoleInBrowser(t *testing.T) {
	t.Parallel()
	browsertest.Both(t, testLines, moduletest.With(newTenv[pgx.Tx], testConsoleInBrowser[pgx.Tx]),
		moduletest.With(newTenv[*sql.Tx], testConsoleInBrowser[*sql.Tx]))
}

func testConsoleInBrowser[TTx any](t *testing.T, e *tenv[TTx]) {
	gate := make(chan struct{})
	var open sync.Once
	m := e.build(t, small(map[string]string{"export.memory_budget_mb": "24", "export.task_peak_mb": "24", "export.shard_rows": "300"}),
		WithHooks(Hooks{BeforeChunk: func(ctx context.Context, task int64, shard, chunk int) {
			if shard >= 5 {
				select {
				case <-gate:
				case <-ctx.Done():
				}
			}
		}}))
	client := e.start(t, m, 5*time.Second, false)
	seed(t, m, "web", 3000, "token:ops-li")

	srv := browsertest.ServeEnv(t, e.Env, client, m)
	base := srv.Base
	br := srv.Session("ops-li", auth.RoleOperator, 120*time.Second)
	br.Do("open the export centre",
		chromedp.Click(chromedp.CSS(`header nav a[href="/exports"]`)),
		chromedp.WaitVisible(chromedp.CSS("#export-create")), br.Shot("export-centre-empty"))
	br.MustSee("empty page", "body", "还没有导出任务")
	// The columns to choose are named in words, beside the names the
	// file's header will carry.
	br.MustSee("column choices", "form.export-new fieldset", "订单号 (order_no)", "金额（分） (amount_minor)", "下单时间（UTC） (created_at)")
	br.Do("create an export",
		chromedp.SetValue(chromedp.CSS(`input[name="tenant"]`), "web"),
		chromedp.Click(chromedp.CSS(`input[name="bom"]`)),
		chromedp.Click(chromedp.CSS("#export-create")),
		chromedp.WaitVisible(chromedp.CSS("#export-progress")))
	url, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`location.href`))
	if err != nil || !strings.Contains(url, "/exports/") {
		t.Fatalf("after create: %q %v", url, err)
	}
	progress := func() float64 {
		v, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`document.querySelector("#export-progress").getAttribute("value")`))
		if err != nil {
			t.Fatal(err)
		}
		f, _ := strconv.ParseFloat(v, 64)
		return f
	}
	moduletest.WaitFor(t, 60*time.Second, "a partial progress bar", func() bool {
		br.Do("reload", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#export-progress")))
		p := progress()
		return p > 0 && p < 100
	})
	br.Do("shot", br.Shot("export-progress"))
	open.Do(func() { close(gate) })
	moduletest.WaitFor(t, 90*time.Second, "the export verified", func() bool {
		br.Do("reload", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#export-verdict")))
		return strings.Contains(br.Text("verdict", "#export-verdict"), "通过")
	})
	if p := progress(); p != 100 {
		t.Fatalf("finished bar at %v", p)
	}
	br.Do("shot", br.Shot("export-done"))
	br.MustSee("shard table", "table.shards", "已完成")
	want := br.Text("digest", "#export-sha")
	got, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`fetch(document.querySelector("#export-download").href).then(r => r.arrayBuffer()).then(async b => {
		const h = Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", b))).map(x => x.toString(16).padStart(2, "0")).join("");
		const text = new TextDecoder().decode(b);
		const lines = text.replace(/^\uFEFF/, "").split("\n").filter(l => l.length > 0).length;
		return h + " " + lines + " " + (new Uint8Array(b)[0] === 0xEF);
	})`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	// 3000 orders + the header; customers never hold newlines, so lines
	// are records.
	if got != want+" 3001 true" {
		t.Fatalf("downloaded %q, the task names %q with 3001 lines and a BOM", got, want)
	}
	// The audit log names the module's own reason in words, Chinese
	// first, English with the language switch; the stored text on hover.
	br.Do("open the audit log", chromedp.Navigate(base+"/audit"), chromedp.WaitVisible(chromedp.CSS("td.reason")))
	br.MustSee("audit reason in Chinese", "body", "发起导出")
	if title, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`(Array.from(document.querySelectorAll("td.reason")).find(td => td.textContent === "发起导出") || {}).title || ""`)); err != nil || title != reasonRequested {
		t.Fatalf("the reason's hover text %q (%v), want %q", title, err, reasonRequested)
	}
	br.Do("audit log in English", chromedp.Navigate(base+"/?lang=en"), chromedp.WaitVisible(chromedp.CSS("header nav")),
		chromedp.Navigate(base+"/audit"), chromedp.WaitVisible(chromedp.CSS("td.reason")))
	br.MustSee("audit reason in English", "body", "export requested")
	br.Do("back to Chinese", chromedp.Navigate(base+"/?lang=zh"), chromedp.WaitVisible(chromedp.CSS("header nav")))
	br.CheckConsole()
}
