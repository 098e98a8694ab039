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

// TestConsoleDetailTimesCarryZone opens, in Chromium and in both
// languages, the detail pages whose times stand in a sentence rather than
// under a time column's head (a key paused at, a batch paused at, a
// job's lease): every line of a detail list that shows a time names its
// zone, in its label or beside the time, since the console shows Beijing
// time and the CLI UTC.
func TestConsoleDetailTimesCarryZone(t *testing.T) {
	t.Parallel()
	e := servertest.SQLite(t)
	ctx := keel.WithActor(context.Background(), "token:browser")
	id, err := e.Insert(ctx, servertest.Args{N: 1}, &keel.InsertOpts{FlowKey: "tenant:9"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Engine.FlowKeyPause(ctx, "tenant:9", "zone test key pause"); err != nil {
		t.Fatal(err)
	}
	batch, err := e.CreateBatch(ctx, "token:browser", "zone test batch", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Engine.BatchPause(ctx, batch, "zone test batch pause"); err != nil {
		t.Fatal(err)
	}
	base := e.Start(t)
	br := browsertest.New(t, 90*time.Second)
	br.Login(base, e.Tokens[auth.RoleOperator])
	zone := map[string]string{"zh": "北京时间", "en": "UTC+8"}
	pages := []string{"/keys/tenant:9", "/batches/" + strconv.FormatInt(batch, 10), "/jobs/" + strconv.FormatInt(id, 10)}
	for _, lang := range []string{"zh", "en"} {
		br.Do("language "+lang, chromedp.Navigate(base+"/?lang="+lang), chromedp.WaitVisible(chromedp.CSS("header nav")))
		for _, p := range pages {
			br.Do(lang+" "+p, chromedp.Navigate(base+p), chromedp.WaitVisible(chromedp.CSS("main dl")))
			// Each dd showing a date and time, with its dt's text.
			lines, err := chromedp.Run(br.Ctx, chromedp.Evaluate[[]map[string]string](`[...document.querySelectorAll("main dd")]
				.filter(dd => /\d{4}-\d{2}-\d{2} \d{2}:\d{2}/.test(dd.textContent))
				.map(dd => ({dt: (dd.previousElementSibling || {}).textContent || "", dd: dd.textContent.trim()}))`))
			if err != nil {
				t.Fatal(err)
			}
			if len(lines) == 0 {
				t.Errorf("%s %s shows no time in its details", lang, p)
			}
			for _, l := range lines {
				if !containsAny(l["dt"]+" "+l["dd"], zone[lang], "UTC+8", "UTC") {
					t.Errorf("%s %s: %q: %q shows a time without its zone", lang, p, l["dt"], l["dd"])
				}
			}
		}
	}
	br.CheckConsole()
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}
