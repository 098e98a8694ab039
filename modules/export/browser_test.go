package export

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/server"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/migration"
)

// TestExportConsoleInBrowser drives Chromium through Keel's real server
// hosting the module on PostgreSQL: an operator creates an export in the
// export centre, watches its progress bar move (half the shards are held
// until the page has shown a partial bar), sees the verification verdict,
// downloads the file and checks its SHA-256 and row count in the page.
func TestExportConsoleInBrowser(t *testing.T) {
	t.Parallel()
	d, _ := testdb.OpenPostgres(t, &testdb.Options{Lines: func(dialect string) []keelmigrate.Line {
		return append(migration.Lines(dialect), testLines(dialect)...)
	}})
	e := &tenv[pgx.Tx]{drv: d, db: keelsql.Pgx(d.Pool()), name: "postgres"}
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

	db := stdlib.OpenDBFromPool(d.Pool())
	t.Cleanup(func() { _ = db.Close() })
	store := auth.NewStore(db, "postgres", auth.AuditedTxOf(e.db, client))
	srv, err := server.New(&server.Config{Addr: "127.0.0.1:0", Engine: client, Auth: store,
		Logger: slog.New(slog.DiscardHandler), Modules: []module.Web{m}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	token, _, err := store.CreateToken(context.Background(), "ops-li", auth.RoleOperator, "test", "browser test fixture")
	if err != nil {
		t.Fatal(err)
	}
	base := srv.URL()
	br := browsertest.New(t, 120*time.Second)
	br.Login(base, token)
	br.Do("open the export centre",
		chromedp.Click(chromedp.CSS(`header nav a[href="/exports"]`)),
		chromedp.WaitVisible(chromedp.CSS("#export-create")), br.Shot("export-centre-empty"))
	br.MustSee("empty page", "body", "还没有导出任务")
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
	br.CheckConsole()
}
