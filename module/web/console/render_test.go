package console_test

import (
	"html/template"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/web/console"
)

// page is how a module uses the envelope: embedded, beside its own words.
type page struct{ console.Page }

func (p page) Shout(s string) string { return strings.ToUpper(s) }

// TestRenderWithTheEnvelope: a module's template reads the envelope's
// words and its own through the embedded Page, in both languages.
func TestRenderWithTheEnvelope(t *testing.T) {
	files := fstest.MapFS{"templates/a.html": {Data: []byte(
		`{{define "a"}}{{.T "你好" "Hello"}}|{{.When .At}}|{{.WhenP nil}}|{{.Zone}}|{{.CanOperate}}|{{.Shout "x"}}|{{up "y"}}|{{.V.CSRF}}{{end}}`)}}
	ts := console.Parse(files, template.FuncMap{"up": strings.ToUpper})
	at := time.Date(2026, 7, 14, 1, 30, 0, 0, time.UTC)
	for _, c := range []struct {
		v    *module.View
		want string
	}{
		{&module.View{Lang: "zh", CSRF: "c", Role: module.RoleOperator}, "你好|2026-07-14 09:30:00|—|北京时间|true|X|Y|c"},
		// html/template writes the zone's + as &#43; in text.
		{&module.View{Lang: "en", CSRF: "c", Role: module.RoleViewer}, "Hello|2026-07-14 09:30:00|—|Beijing time (UTC&#43;8)|false|X|Y|c"},
	} {
		data := struct {
			page
			At time.Time
		}{page{console.Page{V: c.v}}, at}
		got, err := ts.Render("a", "title", "/nav", data)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Body) != c.want || got.Title != "title" || got.Nav != "/nav" {
			t.Errorf("%s: %+v, want body %q", c.v.Lang, got, c.want)
		}
	}
	if _, err := ts.Render("missing", "", "", nil); err == nil {
		t.Error("rendering a template that does not exist succeeded")
	}
}

// TestParsePanicsOnABrokenTemplate: a module with a broken template does
// not start.
func TestParsePanicsOnABrokenTemplate(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a broken template parsed")
		}
	}()
	console.Parse(fstest.MapFS{"templates/a.html": {Data: []byte(`{{define "a"}}{{.T`)}}, nil)
}

// TestRedirectCarriesTheOutcome: the outcome travels as the console's
// flash or err, escaped, and a redirect without one adds no query.
func TestRedirectCarriesTheOutcome(t *testing.T) {
	for _, c := range []struct{ flash, err, want string }{
		{"已确认", "", "/x?flash=%E5%B7%B2%E7%A1%AE%E8%AE%A4"},
		{"", "a&b c", "/x?err=a%26b+c"},
		{"", "", "/x"},
	} {
		w := httptest.NewRecorder()
		r, err := console.Redirect(w, httptest.NewRequest("POST", "/x/act", nil), "/x", c.flash, c.err)
		if r != nil || err != nil {
			t.Errorf("Redirect returned %v %v, want nothing to render", r, err)
		}
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != c.want {
			t.Errorf("%d %q, want 303 %q", w.Code, w.Header().Get("Location"), c.want)
		}
	}
}

// TestQueryTakesTheRedirectMessages: a page a redirect lands on takes
// flash and err besides its own parameters, and refuses anything else.
func TestQueryTakesTheRedirectMessages(t *testing.T) {
	for qs, ok := range map[string]bool{"": true, "flash=a&err=b": true, "device=d1&flash=a": true, "other=1": false} {
		q := console.Query(httptest.NewRequest("GET", "/?"+qs, nil), "device")
		if (q.Err == nil) != ok {
			t.Errorf("%q: %v", qs, q.Err)
		}
	}
}

// TestSiteListsPagesAndNav: every entry is a page, in order; the entries
// with words are the navigation, at their page's path.
func TestSiteListsPagesAndNav(t *testing.T) {
	h := func(http.ResponseWriter, *http.Request, *module.View) (*module.Rendered, error) { return nil, nil }
	s := console.Site{
		{Pattern: "GET /x", Role: module.RoleViewer, Handle: h, ZH: "甲", EN: "X"},
		{Pattern: "GET /x/{id}", Role: module.RoleViewer, Handle: h},
		{Pattern: "POST /x/{id}/act", Role: module.RoleOperator, Handle: h},
		{Pattern: "GET /y", Role: module.RoleAdmin, Handle: h, ZH: "乙", EN: "Y"},
	}
	pages := s.Pages()
	if len(pages) != 4 || pages[2].Pattern != "POST /x/{id}/act" || pages[2].Role != module.RoleOperator || pages[2].Handle == nil {
		t.Errorf("pages %+v", pages)
	}
	nav := s.Nav()
	want := []module.NavItem{{Path: "/x", ZH: "甲", EN: "X"}, {Path: "/y", ZH: "乙", EN: "Y"}}
	if len(nav) != len(want) || nav[0] != want[0] || nav[1] != want[1] {
		t.Errorf("nav %+v, want %+v", nav, want)
	}
}

// TestWordNamesCodes: a code reads as its words in the page's language,
// one the table lacks as the words given for it.
func TestWordNamesCodes(t *testing.T) {
	table := map[string][2]string{"done": {"已完成", "done"}}
	zh, en := &module.View{Lang: "zh"}, &module.View{Lang: "en"}
	for _, c := range []struct{ got, want string }{
		{console.Word(zh, table, "done", "未知", "unknown"), "已完成"},
		{console.Word(en, table, "done", "未知", "unknown"), "done"},
		{console.Word(zh, table, "odd", "未知", "unknown"), "未知"},
		{console.Word(en, nil, "odd", "未知", "unknown"), "unknown"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
