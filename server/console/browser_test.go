package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

// screenshots go to the repository's git-ignored testdata/screenshots/.
var screenshotDir = filepath.Join("..", "..", "testdata", "screenshots")

// chromium finds the browser: KEEL_TEST_CHROMIUM, else a chromium on PATH.
// Without one the test fails under CI=true and is skipped otherwise.
func chromium(t *testing.T) string {
	if p := os.Getenv("KEEL_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium: set KEEL_TEST_CHROMIUM or install Debian's chromium (make test does)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// problems collects runtime exceptions and console errors of the page.
type problems struct {
	mu   sync.Mutex
	list []string
}

func (p *problems) add(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = append(p.list, s)
}

func (p *problems) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.list...)
}

func TestConsoleInBrowser(t *testing.T) {
	bin := chromium(t)
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
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}

	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900)}
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	bctx, cancelT := context.WithTimeout(bctx, 60*time.Second)
	defer cancelT()

	var probs problems
	messages := chromedp.Console(bctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException || m.Type == "assert" {
				probs.add(m.String())
			}
		}
	}()
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			buf, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(screenshotDir, name+".png"), buf, 0o644)
		})
	}
	do := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, actions...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	text := func(step, sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return s
	}

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
		{"audit", "/audit", "job.cancel"},
		{"batches", "/batches", "执行中"},
		{"batch", batchPath, "排队中"},
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
	audit, err := e.Engine.AuditList(ctx, &keeldriver.AuditListParams{Target: "batch:" + strconv.FormatInt(batchID, 10), Limit: 50})
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

	for _, p := range probs.all() {
		t.Errorf("browser reported: %s", p)
	}
	if t.Failed() {
		fmt.Println("screenshots in", screenshotDir)
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
