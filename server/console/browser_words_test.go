package console_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

// goDuration is how Go prints a duration (6m29s, 1.5s, 2h0m0s).
var goDuration = regexp.MustCompile(`\b\d+(h\d+m)?\d*m?\d+(\.\d+)?(s|ms)\b`)

// TestConsoleShowsWordsNotCodes opens, in Chromium and in both languages,
// the jobs list, a job, the keys, a key, the audit log and the queues after
// operators acted on each: audit actions, actors, failure classes and
// durations read as words in the page's language, and the raw value is
// only in the hover title.
func TestConsoleShowsWordsNotCodes(t *testing.T) {
	t.Parallel()
	e := servertest.SQLite(t)
	ctx := keel.WithActor(context.Background(), "token:browser")
	id, err := e.Insert(ctx, servertest.Args{N: 1}, &keel.InsertOpts{FlowKey: "tenant:7"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Insert(ctx, servertest.Args{N: 2}, &keel.InsertOpts{Queue: "notify"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Engine.JobCancel(ctx, id, "words test cancel"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Engine.QueuePause(ctx, "notify", "words test pause"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Engine.FlowKeyPause(ctx, "tenant:7", "words test key pause"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Engine.FlowLimitSet(ctx, &keeltype.FlowLimit{Pattern: "tenant:*", Rate: 5, BreakerFailures: 3,
		BreakerCooldown: 389 * time.Second}, "words test limit"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateBatch(ctx, "token:browser", "words test batch", 2); err != nil {
		t.Fatal(err)
	}
	base := e.Start(t)
	br := browsertest.New(t, 90*time.Second)
	br.Login(base, e.Tokens[auth.RoleOperator])
	raw := []string{"job.cancel", "queue.pause", "flowkey.pause", "flowlimit.set", "batch.create", "session.login",
		"token:browser", "system:", "lease_expired", "6m29s", "queue:notify", "job:" + strconv.FormatInt(id, 10)}
	want := map[string][]string{
		"zh": {"取消任务", "暂停队列", "暂停流控键", "保存限流规则", "创建批量任务", "登录控制台", "令牌 browser", "6 分 29 秒"},
		"en": {"Cancel a job", "Pause a queue", "Pause a flow key", "Save a flow limit", "Create a batch", "Log in to the console",
			"token browser", "6 min 29 s"},
	}
	pages := []string{"/jobs", "/jobs/" + strconv.FormatInt(id, 10), "/keys", "/keys/tenant:7", "/audit", "/queues", "/batches"}
	for _, lang := range []string{"zh", "en"} {
		br.Do("language "+lang, chromedp.Navigate(base+"/?lang="+lang), chromedp.WaitVisible(chromedp.CSS("header nav")))
		var all strings.Builder
		for _, p := range pages {
			br.Do(lang+" "+p, chromedp.Navigate(base+p), chromedp.WaitVisible(chromedp.CSS("main")),
				br.Shot("words-"+lang+strings.NewReplacer("/", "-", ":", "-").Replace(p)))
			text := br.Text(p, "main")
			all.WriteString(text + "\n")
			for _, r := range raw {
				if strings.Contains(text, r) {
					t.Errorf("%s %s shows the raw %q:\n%s", lang, p, r, text)
				}
			}
			if m := goDuration.FindString(text); m != "" {
				t.Errorf("%s %s shows a Go duration %q:\n%s", lang, p, m, text)
			}
			// Each translated cell keeps its raw value in its title.
			cells, err := chromedp.Run(br.Ctx, chromedp.Evaluate[[]map[string]string](`[...document.querySelectorAll("main .actor[title], main .action[title], main .eclass[title]")]
				.map(e => ({title: e.title, text: e.textContent.trim()}))`))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cells {
				if c["title"] != "" && c["title"] == c["text"] {
					t.Errorf("%s %s: a cell shows its raw value %q", lang, p, c["text"])
				}
			}
		}
		for _, w := range want[lang] {
			if !strings.Contains(all.String(), w) {
				t.Errorf("%s: no page shows %q", lang, w)
			}
		}
	}
	br.CheckConsole()
}
