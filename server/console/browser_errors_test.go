package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

// TestConsoleErrorsInWords opens, in Chromium and in both languages, an
// unknown path, a job that does not exist, an over-long filter and a form
// post with a wrong CSRF token: each is a page in the console's layout
// that says what is wrong in the operator's language, never Go's bare 404,
// a driver's message or plain text; the raw detail stays under "details".
func TestConsoleErrorsInWords(t *testing.T) {
	t.Parallel()
	e := servertest.SQLite(t)
	base := e.Start(t)
	br := browsertest.New(t, 60*time.Second)
	br.Login(base, e.Tokens[auth.RoleOperator])
	words := map[string]map[string]string{
		"zh": {"missing": "找不到这个对象", "invalid": "输入有误", "csrf": "表单已过期", "zone": "北京时间（UTC+8）"},
		"en": {"missing": "This does not exist", "invalid": "The input is not valid", "csrf": "The form expired", "zone": "Beijing time (UTC+8)"},
	}
	for _, lang := range []string{"zh", "en"} {
		br.Do("language "+lang, chromedp.Navigate(base+"/?lang="+lang), chromedp.WaitVisible(chromedp.CSS("header nav")))
		// Every page says which zone its times are in.
		br.MustSee(lang+" zone", "#zone", words[lang]["zone"])
		for _, c := range []struct{ name, path, want string }{
			{"unknown path", "/no/such/page", words[lang]["missing"]},
			{"unknown job", "/jobs/99999999", words[lang]["missing"]},
			{"over-long filter", "/jobs?flow_key=" + strings.Repeat("k", 300), words[lang]["invalid"]},
		} {
			br.Do(lang+" "+c.name, chromedp.Navigate(base+c.path), chromedp.WaitVisible(chromedp.CSS("#problem")),
				br.Shot("error-"+lang+"-"+strings.ReplaceAll(c.name, " ", "-")))
			got := br.Text(c.name, "main")
			if !strings.Contains(got, c.want) {
				t.Errorf("%s %s: page says %q, want %q", lang, c.name, got, c.want)
			}
			for _, internal := range []string{"keelsqlite", "keelpgx", "keel:", "404 page not found", "strconv"} {
				if strings.Contains(got, internal) {
					t.Errorf("%s %s: page shows %q: %s", lang, c.name, internal, got)
				}
			}
			br.MustSee(lang+" "+c.name+" layout", "header", "")
		}
		// A form post whose CSRF token is wrong (a stale tab): a page, not
		// plain text.
		br.Do(lang+" queues", chromedp.Navigate(base+"/queues"), chromedp.WaitVisible(chromedp.CSS("main")))
		if _, err := chromedp.Run(br.Ctx, chromedp.Evaluate[bool](`(() => { const f = document.createElement("form"); f.method = "POST";
				f.action = "/queues/default/pause"; const i = document.createElement("input"); i.name = "csrf";
				i.value = "wrong"; f.appendChild(i); document.body.appendChild(f); f.submit(); return true })()`)); err != nil {
			t.Fatal(err)
		}
		br.Do(lang+" csrf", chromedp.WaitVisible(chromedp.CSS("#problem")), br.Shot("error-"+lang+"-csrf"))
		if got := br.Text("csrf", "main"); !strings.Contains(got, words[lang]["csrf"]) {
			t.Errorf("%s csrf: page says %q", lang, got)
		}
	}
	// No CheckConsole: the browser reports each error page's status as a
	// failed load, which is what these pages are.
}
