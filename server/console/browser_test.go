package console_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	e := servertest.SQLite(t)
	ctx := context.Background()
	var ids []int64
	for i := range 3 {
		id, err := e.Insert(ctx, servertest.Args{N: i}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := e.Engine.JobCancel(ctx, ids[0], "browser test"); err != nil {
		t.Fatal(err)
	}
	batchID, err := e.CreateBatch(ctx, "token:browser", "browser test incident", 5)
	if err != nil {
		t.Fatal(err)
	}
	batchPath := "/batches/" + strconv.FormatInt(batchID, 10)
	base := e.Start(t)
	br := browsertest.New(t, 60*time.Second)
	do, text, shot := br.Do, br.Text, br.Shot

	do("log in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		shot("login"),
		chromedp.SendKeys(chromedp.CSS("#token"), e.Tokens[auth.RoleOperator]),
		chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("header nav")),
	)
	pages := []struct{ name, path, mustSee string }{
		{"overview", "/", "概览"},
		{"jobs", "/jobs", "排队中"},
		{"job", "/jobs/" + strconv.FormatInt(ids[0], 10), "已取消"},
		{"queues", "/queues", "队列"},
		{"keys", "/keys", "流控键"},
		{"audit", "/audit", "取消任务"},
		{"batches", "/batches", "执行中"},
		{"batch", batchPath, "排队"},
	}
	for _, p := range pages {
		do("open "+p.name, chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS("main")), shot(p.name))
		if got := text(p.name, "main"); !strings.Contains(got, p.mustSee) {
			t.Errorf("%s: page does not show %q:\n%s", p.name, p.mustSee, got)
		}
	}
	do("jobs", chromedp.Navigate(base+"/jobs"), chromedp.WaitVisible(chromedp.CSS("#jobs")))
	jobsText := text("Chinese statuses", "#jobs")
	for _, want := range []string{"排队中", "已取消"} {
		if !strings.Contains(jobsText, want) {
			t.Errorf("jobs table lacks status %q:\n%s", want, jobsText)
		}
	}

	row := `tr[data-queue="default"]`
	do("pause queue", chromedp.Navigate(base+"/queues"),
		chromedp.Click(chromedp.CSS(row+" button.pause")),
		chromedp.WaitVisible(chromedp.CSS("#confirm-ok")),
		chromedp.SendKeys(chromedp.CSS("#confirm-reason"), "browser test pause"),
		chromedp.Click(chromedp.CSS("#confirm-ok")),
		chromedp.WaitVisible(chromedp.CSS(row+" button.resume")),
		shot("queues-paused"))
	assertPaused(t, e, true)
	do("resume queue",
		chromedp.Click(chromedp.CSS(row+" button.resume")),
		chromedp.WaitVisible(chromedp.CSS("#confirm-ok")),
		chromedp.Click(chromedp.CSS("#confirm-ok")),
		chromedp.WaitVisible(chromedp.CSS(row+" button.pause")))
	assertPaused(t, e, false)

	if nav := text("nav", "header nav"); !strings.Contains(nav, "批量任务") {
		t.Errorf("nav lacks 批量任务: %s", nav)
	}
	do("batch list", chromedp.Navigate(base+"/batches"), chromedp.WaitVisible(chromedp.CSS("#batches progress")))
	if got := text("batch list", "#batches"); !strings.Contains(got, "0/5") {
		t.Errorf("batch list lacks progress 0/5:\n%s", got)
	}
	do("pause batch", chromedp.Navigate(base+batchPath),
		chromedp.WaitVisible(chromedp.CSS("#batch-items")),
		chromedp.Click(chromedp.CSS("#batch-actions button.pause")),
		chromedp.WaitVisible(chromedp.CSS("#confirm-ok")),
		chromedp.SendKeys(chromedp.CSS("#confirm-reason"), "browser test batch pause"),
		chromedp.Click(chromedp.CSS("#confirm-ok")),
		chromedp.WaitVisible(chromedp.CSS("#batch-actions button.resume")),
		shot("batch-paused"))
	if got := text("paused batch", "#bstate"); !strings.Contains(got, "已暂停") {
		t.Errorf("batch state after pause: %q", got)
	}
	if got := text("pause reason", "#pause-why"); !strings.Contains(got, "browser test batch pause") {
		t.Errorf("pause reason: %q", got)
	}
	do("resume batch",
		chromedp.Click(chromedp.CSS("#batch-actions button.resume")),
		chromedp.WaitVisible(chromedp.CSS("#confirm-ok")),
		chromedp.SendKeys(chromedp.CSS("#confirm-reason"), "browser test batch resume"),
		chromedp.Click(chromedp.CSS("#confirm-ok")),
		chromedp.WaitVisible(chromedp.CSS("#batch-actions button.pause")))
	b, err := e.Engine.BatchGet(ctx, batchID)
	if err != nil {
		t.Fatal(err)
	}
	if b.State != "running" && b.State != "queued" {
		t.Errorf("batch state after resume: %s", b.State)
	}
	audit, err := e.Engine.AuditList(ctx, &keel.AuditListParams{Target: "batch:" + strconv.FormatInt(batchID, 10), Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]string{}
	for _, a := range audit {
		actions[a.Action] = a.Reason
	}
	if actions["batch.pause"] != "browser test batch pause" || actions["batch.resume"] != "browser test batch resume" {
		t.Errorf("batch audit: %v", actions)
	}

	do("English", chromedp.Navigate(base+"/jobs?lang=en"), chromedp.WaitVisible(chromedp.CSS("#jobs")))
	if en := text("English", "#jobs"); !strings.Contains(en, "queued") || !strings.Contains(en, "cancelled") {
		t.Errorf("English switch: %s", en)
	}
	do("phone", chromedp.Navigate(base+"/jobs?lang=zh"), chromedp.EmulateViewport(390, 844),
		chromedp.WaitVisible(chromedp.CSS("#jobs")), shot("jobs-phone"))

	br.CheckConsole()
	if t.Failed() {
		t.Log("screenshots in", browsertest.ScreenshotDir())
	}
}

func assertPaused(t *testing.T, e *servertest.Env, want bool) {
	t.Helper()
	rows, err := e.Engine.QueueList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range rows {
		if q.Name == "default" {
			if (q.PausedAt != nil) != want {
				t.Fatalf("queue default paused=%v, want %v", q.PausedAt != nil, want)
			}
			return
		}
	}
	if want {
		t.Fatal("queue default has no row after pause")
	}
}
