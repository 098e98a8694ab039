package delivery

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/server/auth"
)

// TestTaskListLikeItsSiblings opens the requeue task list in Chromium in
// both languages: its title is its navigation label, the list sits in a
// card like the other lists, and each task shows its progress as a bar
// with done/total.
func TestTaskListLikeItsSiblings(t *testing.T) {
	t.Parallel()
	e := newServedEnv(t)
	i := e.start(testSettings("cmpp_addr", "off", "connection_wait", "5m"))
	ent := e.enterprise(i, "华东物流")
	app := e.app(i, ent, "物流回执", "c711", ProtoCMPP30, "")
	now := time.Now()
	for k := range 3 {
		e.seed(i, app, StatusFailed, now.Add(-time.Hour+time.Duration(k)*time.Second), fmt.Sprintf("1370009%04d", k))
	}
	refresh(t, i)
	task := createTask(t, i, Filter{AppID: app.ID, Status: StatusFailed}, CreateTaskRequest{Rate: 1})
	base, token := e.serve(i, "ops-li", auth.RoleOperator)
	br := browsertest.New(t, 150*time.Second)
	br.Login(base, token)
	for _, c := range []struct{ lang, nav string }{{"zh", "重投任务"}, {"en", "Requeue tasks"}} {
		br.Do(c.lang+" task list", chromedp.Navigate(base+"/delivery/tasks?lang="+c.lang),
			chromedp.WaitVisible(chromedp.CSS("#tasks")), br.Shot("delivery-tasks-"+c.lang))
		nav := strings.TrimSpace(br.Text(c.lang+" nav", `header nav a[href="/delivery/tasks"]`))
		if nav != c.nav {
			t.Errorf("%s: navigation label %q, want %q", c.lang, nav, c.nav)
		}
		if h1 := strings.TrimSpace(br.Text(c.lang+" title", "main h1")); h1 != nav {
			t.Errorf("%s: the list's title %q differs from its navigation label %q", c.lang, h1, nav)
		}
		if n := count(t, br, "main section.card #tasks"); n != 1 {
			t.Errorf("%s: the task list is not in a card", c.lang)
		}
		row := fmt.Sprintf(`#tasks tr[data-id="%d"]`, task.ID)
		if n := count(t, br, row+" progress"); n != 1 {
			t.Errorf("%s: the task's row has no progress bar", c.lang)
		}
		if got := strings.TrimSpace(br.Text(c.lang+" progress", row+" .done-total")); !strings.HasSuffix(got, "/3") {
			t.Errorf("%s: progress shows %q, want done/3", c.lang, got)
		}
	}
}
