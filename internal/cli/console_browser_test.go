package cli_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/module/moduletest"
)

// barJS measures the top bar: every item shown in it (brand, the systems,
// the search box, the menu button, the language switch, the operator, log
// out), each item's vertical centre, whether any item leaves the window,
// and whether the page scrolls sideways.
const barJS = `(() => {
  const bar = document.getElementById("top");
  const items = [...bar.querySelectorAll(".brand, #groups > a, #find, #menu, .who > *")]
    .filter(e => e.getClientRects().length > 0);
  const rs = items.map(e => e.getBoundingClientRect());
  const mids = rs.map(r => r.top + r.height / 2);
  let overlap = false;
  const sorted = [...rs].sort((a, b) => a.left - b.left);
  for (let i = 1; i < sorted.length; i++) { if (sorted[i].left < sorted[i-1].right - 1) overlap = true; }
  return JSON.stringify({
    height: bar.getBoundingClientRect().height,
    items: items.length,
    groups: [...bar.querySelectorAll("#groups > a")].filter(e => e.getClientRects().length > 0).length,
    spread: Math.max(...mids) - Math.min(...mids),
    right: Math.max(...rs.map(r => r.right)),
    width: window.innerWidth,
    scrollWidth: document.documentElement.scrollWidth,
    overlap: overlap,
    lang: document.documentElement.lang,
    room: (() => { const g = [...bar.querySelectorAll("#groups > a")].filter(e => e.getClientRects().length > 0);
      const f = document.getElementById("find"); if (!g.length || !f) return -1;
      return f.getBoundingClientRect().left - g[g.length - 1].getBoundingClientRect().right; })(),
  });
})()`

type barMeasure struct {
	Height      float64 `json:"height"`
	Items       int     `json:"items"`
	Groups      int     `json:"groups"`
	Spread      float64 `json:"spread"`
	Right       float64 `json:"right"`
	Width       float64 `json:"width"`
	ScrollWidth float64 `json:"scrollWidth"`
	Overlap     bool    `json:"overlap"`
	Lang        string  `json:"lang"`
	Room        float64 `json:"room"`
}

// waitAt waits until the tab has loaded a page whose path (and query)
// satisfies ok, across the navigation a click or a form starts (an
// evaluation during it fails, and is tried again).
func waitAt(t *testing.T, br *browsertest.Browser, what string, ok func(u *url.URL) bool) *url.URL {
	t.Helper()
	var at *url.URL
	moduletest.WaitFor(t, 30*time.Second, what, func() bool {
		loc, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`document.readyState === "complete" ? location.href : ""`))
		if err != nil || loc == "" {
			return false
		}
		u, err := url.Parse(loc)
		if err != nil || !ok(u) {
			return false
		}
		at = u
		return true
	})
	return at
}

// reloadUntil opens path until cond (a script) holds: the console draws
// charts on the server, so a chart waiting for its second sample appears
// on a later load.
func reloadUntil(t *testing.T, br *browsertest.Browser, base, path, what, cond string) {
	t.Helper()
	moduletest.WaitFor(t, time.Minute, what, func() bool {
		if err := chromedp.Do(br.Ctx, chromedp.Navigate(base+path)); err != nil {
			return false
		}
		ok, err := chromedp.Run(br.Ctx, chromedp.Evaluate[bool](cond))
		return err == nil && ok
	})
}

// waitValue polls the database until query answers a row (the demo's
// simulators write within a minute), and returns its columns as text.
func waitValue(t *testing.T, db *sql.DB, what, query string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		dest := make([]any, n)
		vals := make([]sql.NullString, n)
		for i := range dest {
			dest[i] = &vals[i]
		}
		err := db.QueryRow(query).Scan(dest...)
		if err == nil {
			out := make([]string, n)
			for i, v := range vals {
				out[i] = v.String
			}
			return out
		}
		if !errors.Is(err, sql.ErrNoRows) {
			t.Fatalf("%s: %v", what, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no row within 2 minutes", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestConsoleSystemsInBrowser runs `keel serve --demo` with every
// installed module and, in Chromium: the top bar holds the engine and one
// entry per module on one line at 1,280 px in Chinese and in English, and
// at 390 px folds the systems into a menu that opens every system; the
// search box finds one id of the engine and of each module and opens it;
// every module's home shows its numbers with a chart whose axes carry units
// and the zone, and the overview shows each home as a card. No page logs a
// console error or throws.
func TestConsoleSystemsInBrowser(t *testing.T) {
	t.Parallel()
	srv, token, db := startServeWith(t, map[string]string{"demo": "true", "sample-interval": "1s"})
	base := srv.URL()
	// One id of the engine and of each module, from the demo's data (before
	// the browser starts: its time bounds the browsing only).
	jobID := waitValue(t, db, "a job", `SELECT id FROM keel_job ORDER BY id LIMIT 1`, 1)[0]
	rsv := waitValue(t, db, "a reservation", `SELECT id FROM rsv_reservation ORDER BY id LIMIT 1`, 1)[0]
	dlv := waitValue(t, db, "a delivery record", `SELECT id, msg_id FROM dlv_record ORDER BY id LIMIT 1`, 2)
	sku := waitValue(t, db, "stock", `SELECT sku_id, warehouse_id FROM inv_stock ORDER BY sku_id, warehouse_id LIMIT 1`, 2)
	wb := waitValue(t, db, "a waybill", `SELECT carrier, waybill FROM tracking_waybill ORDER BY waybill LIMIT 1`, 2)
	invRes := waitValue(t, db, "a stock reservation", `SELECT id, order_line FROM inv_reservation ORDER BY id LIMIT 1`, 2)
	pay := waitValue(t, db, "a paid payment", `SELECT payment_no, transaction_id FROM pay_payment WHERE transaction_id IS NOT NULL ORDER BY payment_no LIMIT 1`, 2)
	exp := waitValue(t, db, "an export task", `SELECT id FROM export_tasks ORDER BY id LIMIT 1`, 1)[0]
	dev := waitValue(t, db, "a device", `SELECT id FROM alarm_device ORDER BY id LIMIT 1`, 1)[0]

	// The operator's browser speaks English while the pages are Chinese:
	// what the pages show is the page's language, not the browser's.
	br := browsertest.NewWith(t, 8*time.Minute, browsertest.Options{Lang: "en-US"})
	br.Login(base, token)
	// The systems are what is installed: the engine and each module with a
	// home, as the bar names them; these four at least.
	homes, err := chromedp.Run(br.Ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("#groups > a")].filter(a => a.getAttribute("href").startsWith("/home/")).map(a => a.dataset.group)`))
	if err != nil {
		t.Fatal(err)
	}
	modules := homes
	for _, want := range []string{"reservation", "delivery", "inventory", "tracking", "alarm", "payment", "export"} {
		if !slices.Contains(modules, want) {
			t.Errorf("the bar has no home of %s: %v", want, modules)
		}
	}

	// Navigation: one line at 1,280 px, a menu at 390 px, both languages.
	for _, lang := range []string{"zh", "en"} {
		for _, width := range []int64{1280, 390} {
			step := fmt.Sprintf("%s at %d px", lang, width)
			br.Do(step, chromedp.EmulateViewport(width, 900), chromedp.Navigate(base+"/?lang="+lang),
				chromedp.WaitVisible(chromedp.CSS("#top")), br.Shot(fmt.Sprintf("systems-nav-%s-%d", lang, width)))
			raw, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](barJS))
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			var m barMeasure
			if err := json.Unmarshal([]byte(raw), &m); err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			t.Logf("%s: bar %.0f px high, %d items, centres within %.1f px, right edge %.0f of %.0f, %.0f px free after the systems",
				step, m.Height, m.Items, m.Spread, m.Right, m.Width, m.Room)
			wantLang := map[string]string{"zh": "zh-CN", "en": "en"}[lang]
			if m.Lang != wantLang {
				t.Errorf("%s: page lang %q, want %q", step, m.Lang, wantLang)
			}
			if m.Spread > 4 || m.Height > 60 || m.Overlap {
				t.Errorf("%s: the bar is not one line: %+v", step, m)
			}
			if m.Right > m.Width+0.5 || m.ScrollWidth > m.Width+0.5 {
				t.Errorf("%s: the bar or page is wider than the window: %+v", step, m)
			}
			if width == 1280 && m.Groups != 1+len(modules) {
				t.Errorf("%s: %d systems in the bar, want the engine and %d modules", step, m.Groups, len(modules))
			}
			if width == 390 {
				if m.Groups != 0 {
					t.Errorf("%s: %d systems shown beside the menu button", step, m.Groups)
				}
				br.Do(step+": open the menu", chromedp.Click(chromedp.CSS("#menu")), chromedp.WaitVisible(chromedp.CSS("#side")),
					br.Shot(fmt.Sprintf("systems-menu-%s", lang)))
				side := br.Text(step, "#side")
				for _, want := range map[string][]string{"zh": {"引擎", "事件与对账", "预约", "投递", "库存", "物流跟踪"},
					"en": {"Engine", "Events & recon", "Reservations", "Delivery", "Inventory", "Tracking"}}[lang] {
					if !strings.Contains(side, want) {
						t.Errorf("%s: the menu lacks %q:\n%s", step, want, side)
					}
				}
				br.Do(step+": a system from the menu", chromedp.Click(chromedp.CSS(`#side section[data-group="tracking"] a.gh`)))
				waitAt(t, br, step+": the system's home", func(u *url.URL) bool { return u.Path == "/home/tracking" })
			}
		}
	}
	br.Do("back to Chinese at 1,280 px", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/?lang=zh"),
		chromedp.WaitVisible(chromedp.CSS("#top")))

	// Search: one id of the engine and of each module.
	searches := []struct{ name, q, path string }{
		{"engine job", jobID, "/jobs/" + jobID},
		{"reservation", rsv, "/reservation/reservations/" + rsv},
		{"delivery message id", dlv[1], "/delivery/records/" + dlv[0]},
		{"inventory SKU", sku[0], "/inventory?warehouse=" + url.QueryEscape(sku[1])},
		{"tracking waybill", wb[1], "/tracking/waybills/" + wb[0] + "/" + wb[1]},
		{"inventory reservation", invRes[1], "/inventory/reservations/" + invRes[0]},
		{"payment number", pay[0], "/payments/" + pay[0]},
		{"channel transaction id", pay[1], "/payments/" + pay[0]},
		{"export task", exp, "/exports/" + exp},
		{"alarm device", dev, "/alarm?device=" + url.QueryEscape(dev)},
	}
	for _, s := range searches {
		br.Do("search "+s.name, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#find-q")),
			chromedp.SendKeys(chromedp.CSS("#find-q"), s.q), chromedp.Submit(chromedp.CSS("#find-q")))
		u := waitAt(t, br, "search "+s.name, func(u *url.URL) bool { return u.Path != "/" })
		if u.RequestURI() != s.path {
			// Several things have this id: the list names each, and the
			// one wanted opens from it.
			if u.Path != "/search" {
				t.Errorf("search %s (%q) opened %s, want %s", s.name, s.q, u.RequestURI(), s.path)
				continue
			}
			sel := fmt.Sprintf(`#search-hits a[href=%q]`, s.path)
			br.Do("search "+s.name+": pick", chromedp.Click(chromedp.CSS(sel)))
			waitAt(t, br, "search "+s.name+": pick", func(u *url.URL) bool { return u.Path != "/search" })
		}
		br.Do("search "+s.name+": opened", chromedp.WaitVisible(chromedp.CSS("main")), br.Shot("search-"+strings.ReplaceAll(s.name, " ", "-")))
		if loc, _ := chromedp.Run(br.Ctx, chromedp.Location()); !strings.HasSuffix(loc, s.path) {
			t.Errorf("search %s (%q) ended at %s, want %s", s.name, s.q, loc, s.path)
		}
	}
	br.Do("search nothing", chromedp.Navigate(base+"/search?q=no-such-id-anywhere"), chromedp.WaitVisible(chromedp.CSS("#search-none")))
	br.MustSee("search nothing", "#search-none", "没有找到", "no-such-id-anywhere")

	// Every module's home, and the overview's cards.
	for _, name := range modules {
		sel := fmt.Sprintf(`#home[data-module=%q]`, name)
		reloadUntil(t, br, base, "/home/"+name, "the trends of "+name,
			`document.querySelectorAll("#home .stat-card svg.chart rect.hover title").length > 0`)
		br.Do("home of "+name, chromedp.WaitVisible(chromedp.CSS(sel)), br.Shot("home-"+name))
		stats, err := chromedp.Run(br.Ctx, chromedp.Evaluate[int](`document.querySelectorAll("#home .stat-card").length`))
		if err != nil {
			t.Fatal(err)
		}
		if stats < 2 {
			t.Errorf("home of %s shows %d numbers", name, stats)
		}
		br.MustSee("home of "+name, "#home", "单位：", "时间（北京时间 UTC+8）", "采样一次")
		if on, _ := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`document.querySelector("#side section.on").dataset.group`)); on != name {
			t.Errorf("home of %s: the side bar marks %q", name, on)
		}
		// Each number links to the list behind it, and the list opens.
		link, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`document.querySelector("#home .stat-card a").getAttribute("href")`))
		if err != nil {
			t.Fatal(err)
		}
		br.Do("home of "+name+": open a list", chromedp.Click(chromedp.CSS("#home .stat-card a")))
		u := waitAt(t, br, "home of "+name+": the list", func(u *url.URL) bool { return !strings.HasPrefix(u.Path, "/home/") })
		if u.RequestURI() != link {
			t.Errorf("home of %s: the number's link %s ended at %s", name, link, u.RequestURI())
		}
	}
	// A card whose numbers could not be read within the console's bound says
	// so (暂时无法读取…), which a loaded machine can show for one load; what
	// must hold is that every card shows its numbers once it can.
	reloadUntil(t, br, base, "/", "the overview's charts and every system's numbers",
		`document.querySelectorAll("#chart-backlog rect.hover").length > 1 &&
		 [...document.querySelectorAll("#systems .home-card")].every(c => c.querySelectorAll(".stat").length >= 2)`)
	br.Do("overview cards", chromedp.WaitVisible(chromedp.CSS("#systems")), br.Shot("overview-systems"))
	for _, name := range modules {
		n, err := chromedp.Run(br.Ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll('#systems .home-card[data-module=%q] .stat').length`, name)))
		if err != nil {
			t.Fatal(err)
		}
		if n < 2 {
			t.Errorf("overview: the card of %s has %d numbers", name, n)
		}
	}
	br.MustSee("overview charts", "#chart-backlog", "单位：个任务", "时间（北京时间 UTC+8）", "采样一次")
	hover, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`document.querySelector("#chart-backlog rect.hover title").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(hover, "UTC+8") || !strings.Contains(hover, "个任务") {
		t.Errorf("a chart's hover value says %q", hover)
	}
	checkRenderedPages(t, br, base)
	checkDateField(t, br, base+"/delivery/records?lang=zh", "zh", "en")
	br.CheckConsole()

	// And the other way round: a Chinese browser on English pages.
	zh := browsertest.NewWith(t, 3*time.Minute, browsertest.Options{Lang: "zh-CN"})
	zh.Login(base, token)
	checkDateField(t, zh, base+"/reservation/slots?lang=en", "en", "zh")
	zh.CheckConsole()
	if t.Failed() {
		t.Log("screenshots in", browsertest.ScreenshotDir())
	}
}

// pagesJS fetches every page of the side bar (and the first record each
// list links to) in both languages and reports, per page: its status and
// lang, the time cells whose column head and text name no zone, the
// browser-drawn date inputs and the placeholders of the console's own.
const pagesJS = `(async () => {
  const timeRe = /\d{4}-\d{2}-\d{2} \d{2}:\d{2}/, zoneRe = /北京时间|UTC/;
  const check = (doc) => {
    const bad = [];
    for (const table of doc.querySelectorAll("main table")) {
      const heads = [];
      const hr = table.tHead && table.tHead.rows.length ? table.tHead.rows[table.tHead.rows.length - 1] : null;
      if (hr) { for (const c of hr.cells) { for (let i = 0; i < c.colSpan; i++) heads.push(c.textContent.trim()); } }
      for (const body of table.tBodies) for (const row of body.rows) {
        let col = 0;
        for (const c of row.cells) {
          const text = c.textContent.trim();
          if (timeRe.test(text) && !zoneRe.test(text) && !zoneRe.test(heads[col] || ""))
            bad.push((table.id || table.className || "table") + " · " + (heads[col] || "column " + (col + 1)) + " · " + text.slice(0, 40));
          col += c.colSpan;
        }
      }
    }
    return {bad,
      native: [...doc.querySelectorAll("input")].filter(i => ["date", "datetime-local", "time", "month", "week"].includes((i.getAttribute("type") || "").toLowerCase())).map(i => i.name),
      dates: [...doc.querySelectorAll("input[data-date]")].map(i => i.getAttribute("placeholder")),
      links: [...doc.querySelectorAll("main table tbody a[href^='/']")].map(a => a.getAttribute("href")).filter(h => !h.endsWith("/file"))};
  };
  const nav = [...new Set([...document.querySelectorAll("#side a[href^='/']")].map(a => a.getAttribute("href")))];
  const pages = [...nav], seen = new Set(nav.map(p => p.split("?")[0]));
  const out = [];
  for (const lang of ["zh", "en"]) {
    for (let i = 0; i < pages.length; i++) {
      const r = await fetch(pages[i] + (pages[i].includes("?") ? "&" : "?") + "lang=" + lang, {credentials: "same-origin"});
      const doc = new DOMParser().parseFromString(await r.text(), "text/html");
      const c = check(doc);
      if (lang === "zh" && i < nav.length) {
        const l = c.links.find(h => !seen.has(h.split("?")[0]));
        if (l) { seen.add(l.split("?")[0]); pages.push(l); }
      }
      out.push({path: pages[i], lang, status: r.status, html: doc.documentElement.lang, bad: c.bad, native: c.native, dates: c.dates});
    }
  }
  await fetch("/?lang=zh", {credentials: "same-origin"});
  return JSON.stringify(out);
})()`

// checkRenderedPages walks every console page in both languages: each
// answers, every table column of times names its zone (in its head or on
// each value, through the module kit's TimeHead), and no date input is
// the browser's own (drawn in the browser's language): the console's
// date fields hint their format in the page's language.
func checkRenderedPages(t *testing.T, br *browsertest.Browser, base string) {
	t.Helper()
	br.Do("the pages", chromedp.Navigate(base+"/?lang=zh"), chromedp.WaitVisible(chromedp.CSS("#side")))
	raw, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](pagesJS, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("walking the pages: %v", err)
	}
	var pages []struct {
		Path, Lang, HTML string
		Status           int
		Bad, Native      []string
		Dates            []string
	}
	if err := json.Unmarshal([]byte(raw), &pages); err != nil {
		t.Fatal(err)
	}
	hint := map[string]string{"zh": "年-月-日", "en": "yyyy-mm-dd"}
	dates := map[string]int{}
	for _, p := range pages {
		where := p.Path + " (" + p.Lang + ")"
		if p.Status != 200 {
			t.Errorf("%s: status %d", where, p.Status)
			continue
		}
		if want := map[string]string{"zh": "zh-CN", "en": "en"}[p.Lang]; p.HTML != want {
			t.Errorf("%s: lang %q", where, p.HTML)
		}
		for _, b := range p.Bad {
			t.Errorf("%s: a time without its zone: %s", where, b)
		}
		for _, n := range p.Native {
			t.Errorf("%s: input %q is the browser's date input (drawn in the browser's language)", where, n)
		}
		for _, h := range p.Dates {
			dates[p.Lang]++
			if !strings.HasPrefix(h, hint[p.Lang]) {
				t.Errorf("%s: a date field hints %q", where, h)
			}
		}
	}
	t.Logf("%d pages walked (%d in each language); date fields: %v", len(pages), len(pages)/2, dates)
	if len(pages) < 40 || dates["zh"] < 3 || dates["en"] < 3 {
		t.Errorf("the walk reached %d pages and %v date fields", len(pages), dates)
	}
}

// checkDateField opens the first date field's calendar on a page in lang
// in a browser whose own language is other: the browser says it speaks
// other, and the field's hint, the calendar's month and weekdays are in
// lang; a picked day is what the field holds.
func checkDateField(t *testing.T, br *browsertest.Browser, pageURL, lang, other string) {
	t.Helper()
	step := "date field (" + lang + " page, " + other + " browser)"
	br.Do(step, chromedp.Navigate(pageURL), chromedp.WaitVisible(chromedp.CSS(".date-field input[data-date]")))
	if nl, _ := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`navigator.language`)); !strings.HasPrefix(nl, other) {
		t.Fatalf("%s: the browser speaks %q", step, nl)
	}
	br.Do(step+": open", chromedp.Click(chromedp.CSS(".date-field button.date-open")), chromedp.WaitVisible(chromedp.CSS(".date-pop .date-day")),
		br.Shot("date-field-"+lang))
	raw, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`JSON.stringify({
	  hint: document.querySelector(".date-field input[data-date]").placeholder,
	  type: document.querySelector(".date-field input[data-date]").type,
	  title: document.querySelector(".date-pop .date-title").textContent,
	  days: [...document.querySelectorAll(".date-pop .date-wd")].map(e => e.textContent).join(" "),
	  today: document.querySelector(".date-pop .date-today").textContent})`))
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Hint, Type, Title, Days, Today string }
	_ = json.Unmarshal([]byte(raw), &got)
	want := map[string]struct {
		hint, days, today string
		title             *regexp.Regexp
	}{
		"zh": {"年-月-日", "一 二 三 四 五 六 日", "今天", regexp.MustCompile(`^\d{4}年\d{1,2}月$`)},
		"en": {"yyyy-mm-dd", "Mo Tu We Th Fr Sa Su", "Today", regexp.MustCompile(`^[A-Z][a-z]+ \d{4}$`)},
	}[lang]
	if got.Type != "text" || got.Hint != want.hint || got.Days != want.days || got.Today != want.today || !want.title.MatchString(got.Title) {
		t.Errorf("%s: %+v", step, got)
	}
	day, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`document.querySelectorAll(".date-pop .date-day")[14].dataset.day`))
	if err != nil {
		t.Fatal(err)
	}
	br.Do(step+": pick", chromedp.Click(chromedp.CSS(`.date-pop .date-day[data-day="`+day+`"]`)))
	if v, _ := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`document.querySelector(".date-field input[data-date]").value`)); v != day {
		t.Errorf("%s: picked %s, the field holds %q", step, day, v)
	}
}

// TestSearchAPI: GET /api/v1/search finds a job by id, answers an empty
// list for an id nothing has, and refuses a missing or over-long query
// with invalid_argument (problem+json). (That a viewer may search is the
// authorization walk's.)
func TestSearchAPI(t *testing.T) {
	t.Parallel()
	srv, token, db := startServe(t)
	h := srv.API()
	id := waitValue(t, db, "a job", `SELECT id FROM keel_job ORDER BY id LIMIT 1`, 1)[0]
	jobID, _ := strconv.ParseInt(id, 10, 64)
	code, body := apiCall(t, h, token, "GET", "/api/v1/search?q="+strconv.FormatInt(jobID, 10), nil)
	if code != 200 {
		t.Fatalf("search: %d %v", code, body)
	}
	found := false
	for _, hit := range body["hits"].([]any) {
		m := hit.(map[string]any)
		if m["kind"] == "job" && m["path"] == "/jobs/"+strconv.FormatInt(jobID, 10) {
			found = true
		}
	}
	if !found {
		t.Errorf("search for job %d: %v", jobID, body)
	}
	code, body = apiCall(t, h, token, "GET", "/api/v1/search?q=nothing-has-this-id", nil)
	if code != 200 || len(body["hits"].([]any)) != 0 {
		t.Errorf("search for nothing: %d %v", code, body)
	}
	for _, q := range []string{"", "%20%20", strings.Repeat("x", 201)} {
		code, body = apiCall(t, h, token, "GET", "/api/v1/search?q="+q, nil)
		if code != 400 || body["code"] != "invalid_argument" {
			t.Errorf("search q=%.20q: %d %v", q, code, body)
		}
	}
}
