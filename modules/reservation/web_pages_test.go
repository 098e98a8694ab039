package reservation

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/module"
)

// console mounts the module's pages the way the console does, as a user of
// role in language lang.
func console[TTx any](m *Module[TTx], lang string, role module.Role) http.Handler {
	mux := http.NewServeMux()
	for _, p := range m.Pages() {
		handle, need := p.Handle, p.Role
		mux.HandleFunc(p.Pattern, func(w http.ResponseWriter, r *http.Request) {
			if role < need {
				http.Error(w, "forbidden", http.StatusForbidden)
				return
			}
			v := &module.View{Lang: lang, CSRF: "csrf-token", Actor: "user:op", Role: role}
			out, err := handle(w, r, v)
			if err != nil {
				status, _ := problemOf(err)
				http.Error(w, err.Error(), status)
				return
			}
			if out != nil {
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				_, _ = w.Write([]byte("<title>" + out.Title + "</title><nav>" + out.Nav + "</nav>" + string(out.Body)))
			}
		})
	}
	return mux
}

func get(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String())
	}
	return rec.Body.String()
}

// post submits a form and returns where it redirected.
func post(t *testing.T, h http.Handler, path string, form url.Values) *url.URL {
	t.Helper()
	form.Set("csrf", "csrf-token")
	req := httptest.NewRequest("POST", path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("POST %s: %d %s", path, rec.Code, rec.Body.String())
	}
	u, err := url.Parse(rec.Header().Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

var tags = regexp.MustCompile(`<[^>]*>`)

// visible is the page's text without markup (attributes may carry raw
// values; what the reader sees may not).
func visible(html string) string { return tags.ReplaceAllString(html, " ") }

func noRawWords(t *testing.T, html string) {
	t.Helper()
	text := visible(html)
	for _, raw := range []string{"pending_payment", "checked_in", "dry_run", "offer_lapsed", "availability"} {
		if strings.Contains(text, raw) {
			t.Fatalf("raw value %q shown: %s", raw, text)
		}
	}
}

func TestConsolePages(t *testing.T) {
	runBoth(t, testConsolePages[pgx.Tx], testConsolePages[*sql.Tx])
}

func testConsolePages[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	m := e.module(t)
	f := setup(t, m, 2)
	r1 := paid(t, m, f.slot.ID, "u1")
	r2 := paid(t, m, f.slot.ID, "u2")
	e.clock.Set(t0.Add(5 * time.Minute))
	zh := console(m, "zh", module.RoleAdmin)
	en := console(m, "en", module.RoleAdmin)
	viewer := console(m, "zh", module.RoleViewer)

	body := get(t, zh, "/reservation/slots?day=2030-01-07")
	if !strings.Contains(body, "预约时段") || !strings.Contains(body, `data-slot="1"`) || !strings.Contains(body, "A-01") {
		t.Fatalf("slots page: %s", body)
	}
	noRawWords(t, body)
	body = get(t, en, "/reservation/reservations?state=paid")
	if !strings.Contains(body, "paid, awaiting check-in") || strings.Count(body, "data-reservation=") != 2 {
		t.Fatalf("reservations page: %s", body)
	}
	noRawWords(t, body)

	// Check in from the detail page: a confirmed form, audited as the user.
	body = get(t, zh, "/reservation/reservations/"+itoa(r1.ID))
	if !strings.Contains(body, `name="csrf" value="csrf-token"`) || !strings.Contains(body, "签到") {
		t.Fatalf("detail page: %s", body)
	}
	if strings.Contains(get(t, viewer, "/reservation/reservations/"+itoa(r1.ID)), "/checkin") {
		t.Fatal("a viewer is offered actions")
	}
	loc := post(t, zh, "/reservation/reservations/"+itoa(r1.ID)+"/checkin",
		url.Values{"back": {"/reservation/reservations/" + itoa(r1.ID)}, "reason": {"到店"}})
	if loc.Query().Get("flash") == "" || loc.Path != "/reservation/reservations/"+itoa(r1.ID) {
		t.Fatalf("after check-in: %s", loc)
	}
	hist, _ := m.History(ctx, r1.ID)
	if last := hist[len(hist)-1]; last.ToState != StateCheckedIn || last.Actor != "user:op" {
		t.Fatalf("history: %+v", last)
	}
	// Release u2; restoring needs a reason.
	e.clock.Set(t0.Add(15 * time.Minute))
	mustScan(t, m)
	loc = post(t, zh, "/reservation/reservations/"+itoa(r2.ID)+"/restore", url.Values{"reason": {"短"}})
	if loc.Query().Get("err") == "" {
		t.Fatalf("restore without a reason: %s", loc)
	}
	body = get(t, en, "/reservation/reservations/"+itoa(r2.ID))
	if !strings.Contains(body, "released (no-show)") || !strings.Contains(body, "system: scan") || !strings.Contains(body, "release notice") {
		t.Fatalf("released detail: %s", body)
	}
	noRawWords(t, body)
	// The history's reasons the module wrote read in the page's language,
	// the stored text in the cell's title.
	body = get(t, zh, "/reservation/reservations/"+itoa(r2.ID))
	for _, want := range []string{"爽约：释放时间点前未签到", "已支付", `title="no-show: not checked in by the release point"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("released detail (zh) lacks %q: %s", want, body)
		}
	}
	if strings.Contains(body, ">paid<") || strings.Contains(body, ">booked<") {
		t.Fatalf("released detail (zh) shows a stored English reason: %s", body)
	}
	loc = post(t, zh, "/reservation/reservations/"+itoa(r2.ID)+"/restore", url.Values{"reason": {"用户在门口，手机没电"}, "back": {"//evil.example/x"}})
	if loc.Host != "" || loc.Query().Get("flash") == "" {
		t.Fatalf("restore: %s", loc)
	}
	wantState(t, m, r2.ID, StateRestored)

	// Settings: the gray switch from the form, audited.
	body = get(t, zh, "/reservation/categories")
	if !strings.Contains(body, `action="/reservation/categories/ws"`) || !strings.Contains(body, "未到店策略") {
		t.Fatalf("categories page: %s", body)
	}
	if strings.Contains(get(t, viewer, "/reservation/categories"), `action="/reservation/categories/ws"`) {
		t.Fatal("a viewer is offered the settings form")
	}
	form := url.Values{"version": {"1"}, "name_zh": {"工位"}, "name_en": {"Desk"}, "grace_minutes": {"10"},
		"bands": {"11:00-13:00=5"}, "reminder_minutes": {"15"}, "appeal_minutes": {"30"}, "hold_minutes": {"10"},
		"release_mode": {"dry_run"}, "reason": {"灰度：先演练"}}
	if loc = post(t, zh, "/reservation/categories/ws", form); loc.Query().Get("flash") == "" {
		t.Fatalf("save: %s", loc)
	}
	if c, _ := m.Category(ctx, "ws"); c.ReleaseMode != ModeDryRun || len(c.Bands) != 1 || c.UpdatedBy != "user:op" {
		t.Fatalf("saved: %+v", c)
	}
	form.Set("bands", "11:00-10:00=x")
	if loc = post(t, zh, "/reservation/categories/ws", form); loc.Query().Get("err") == "" {
		t.Fatalf("bad bands accepted: %s", loc)
	}
	body = get(t, en, "/reservation/categories?user=u2")
	if !strings.Contains(body, "dry run (logged, not released)") || !strings.Contains(body, "Reset record") {
		t.Fatalf("categories (en): %s", body)
	}
	noRawWords(t, body)

	body = get(t, zh, "/reservation/runs")
	if !strings.Contains(body, "释放扫描") || !strings.Contains(body, `data-run="`) || strings.Contains(body, "rsv-dead-badge") || strings.Contains(body, `id="drifts"`) {
		t.Fatalf("runs page: %s", body)
	}
	if body = get(t, zh, "/reservation/runs?check=1"); !strings.Contains(body, `<dd id="drifts">0</dd>`) {
		t.Fatalf("runs page with the check: %s", body)
	}
}

func TestDeadLetterBadge(t *testing.T) {
	e := newSQLiteEnv(t)
	m := e.module(t, WithRestoreHook(func(context.Context, Candidate) error { return errInventory }))
	m.set.maxRetries = 1
	f := setup(t, m, 1)
	r := paid(t, m, f.slot.ID, "u1")
	e.clock.Set(*r.ExpectedReleaseAt)
	mustScan(t, m)
	zh := console(m, "zh", module.RoleOperator)
	for _, p := range []string{"/reservation/slots", "/reservation/reservations", "/reservation/runs", "/reservation/categories"} {
		if body := get(t, zh, p); !strings.Contains(body, `id="rsv-dead-badge"`) || !strings.Contains(body, "死信 1") {
			t.Fatalf("%s has no dead-letter badge", p)
		}
	}
	body := get(t, zh, "/reservation/runs")
	if !strings.Contains(body, "/reservation/dead-letters/"+itoa(r.ID)+"/requeue") {
		t.Fatalf("no requeue form: %s", body)
	}
	body = get(t, zh, "/reservation/reservations?dead=1")
	if strings.Count(body, "data-reservation=") != 1 {
		t.Fatalf("dead-letter filter: %s", body)
	}
}

func TestSafeBack(t *testing.T) {
	for in, want := range map[string]string{
		"/reservation/runs?flash=x&kind=scan": "/reservation/runs?kind=scan",
		"//evil.example/":                     "/d",
		"https://evil.example/":               "/d",
		"/a\\b":                               "/d",
		"":                                    "/d",
		"/reservation/reservations/3":         "/reservation/reservations/3",
	} {
		if got := safeBack(in, "/d"); got != want {
			t.Errorf("safeBack(%q) = %q, want %q", in, got, want)
		}
	}
}
