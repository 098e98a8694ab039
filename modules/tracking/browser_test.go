package tracking

import (
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/server/auth"
)

// TestTrackingConsoleInBrowser drives Chromium through Keel's real server
// hosting the module on PostgreSQL: an operator searches a waybill, opens
// it, sees the customer's status with 同步中 / 数据待补全, the gap being
// backfilled, the timeline with its raw evidence, and the carrier health
// with both shares and their breakers.
func TestTrackingConsoleInBrowser(t *testing.T) {
	t.Parallel()
	e := newEnv(browsertest.PostgresEnv(t, lines))
	c := domain.DemoCarriers()[0]
	s := simCarrier(t, &c)
	in := startInstance(t, e, "browser", []domain.Carrier{c})
	m := in.m
	// The carrier's pull API knows the parcel but not event 2 yet: the gap
	// stays open, its backfill waiting.
	evs := simJourney(&c, "WB9001", 3)
	s.AddParcel(evs[0], evs[2])
	ingestOne(t, m, c.Code, `{"events":[{"event_id":"`+evs[0].EventID+`","waybill":"WB9001","seq":1,"code":"`+evs[0].Code+`","occurred_at":"`+evs[0].OccurredAt+`","location":"深圳"}]}`)
	ingestOne(t, m, c.Code, `{"events":[{"event_id":"`+evs[2].EventID+`","waybill":"WB9001","seq":3,"code":"`+evs[2].Code+`","occurred_at":"`+evs[2].OccurredAt+`","location":"洛杉矶"}]}`)

	srv := browsertest.ServeEnv(t, e.Env, in.client, m)
	br := srv.Session("ops-li", auth.RoleOperator, 90*time.Second)
	br.MustSee("navigation", "header nav", "轨迹查询", "承运商健康")
	br.Do("open tracking from the navigation", chromedp.Click(chromedp.CSS(`header nav a[href="/tracking"]`)))
	br.At("tracking", func(u *url.URL) bool { return u.Path == "/tracking" })
	br.Do("the search form", chromedp.WaitVisible(chromedp.CSS("#search")))
	br.Do("search the waybill",
		chromedp.SendKeys(chromedp.CSS("#q"), "WB90"),
		chromedp.Click(chromedp.CSS(`#search button[type="submit"]`)))
	br.At("the search's results", func(u *url.URL) bool { return u.Path == "/tracking" && u.Query().Get("q") == "WB90" })
	br.Do("the result", chromedp.WaitVisible(chromedp.CSS(`#waybills a[href="/tracking/waybills/cnhub/WB9001"]`)), br.Shot("tracking-search"))
	br.MustSee("results", "#waybills", "WB9001", "到港", "3")
	br.Do("open the waybill", chromedp.Click(chromedp.CSS(`#waybills a[href="/tracking/waybills/cnhub/WB9001"]`)))
	br.At("the waybill", func(u *url.URL) bool { return u.Path == "/tracking/waybills/cnhub/WB9001" })
	br.Do("the timeline", chromedp.WaitVisible(chromedp.CSS("#timeline")), br.Shot("tracking-waybill"))
	br.MustSee("customer view", "#view", "到港", "同步中", "数据待补全", "最近更新", "最近核对")
	br.MustSee("gap", "#gaps", "2", "补拉中")
	br.MustSee("timeline", "#timeline", "揽收", "到港", "深圳", "洛杉矶", "已推进", "推送")
	br.Do("show a raw payload", chromedp.Click(chromedp.CSS("#timeline details summary")))
	br.MustSee("raw evidence", "#timeline details pre", `"event_id":"`+evs[0].EventID+`"`)
	br.Do("carrier health", chromedp.Click(chromedp.CSS(`header nav a[href="/tracking/carriers"]`)))
	br.At("the carriers page", func(u *url.URL) bool { return u.Path == "/tracking/carriers" })
	br.Do("the health table", chromedp.WaitVisible(chromedp.CSS("#health")), br.Shot("tracking-carriers"))
	br.MustSee("health", "#health", "华南集运", "500/s", "300/s", "200/s", "正常", "v1")
	br.CheckConsole()
}
