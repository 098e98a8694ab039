// Package console is the scaffolding every module's console pages share,
// written once so that the modules' pages behave and read alike: the list
// of a module's pages that is also its navigation (Site), its templates
// and their rendering, the data envelope the templates are written
// against (Page), the words of the codes a page shows (Word), and the
// redirect that carries a form's outcome to the page it returns to. It
// lives beside package web rather than in it because it speaks in the
// module kit's View and Rendered, and package module itself depends on
// web.
package console

import (
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"time"

	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/web"
)

// templateFiles is where every module keeps its page templates, so that
// a module's pages read the same way as the next one's.
const templateFiles = "templates/*.html"

// Templates are a module's page templates, parsed once.
type Templates struct{ t *template.Template }

// Parse parses the templates/*.html of files (the module's
// //go:embed templates/*.html) with funcs, nil for none. A template that
// does not parse panics: it is a fault of the module's source, and a
// module whose pages cannot render must not start.
func Parse(files fs.FS, funcs template.FuncMap) *Templates {
	return &Templates{t: template.Must(template.New("").Funcs(funcs).ParseFS(files, templateFiles))}
}

// Render renders the template name with data as the page titled title,
// marking nav in the console's navigation.
func (t *Templates) Render(name, title, nav string, data any) (*module.Rendered, error) {
	return module.Render(t.t, name, title, nav, data)
}

// Page is what a module's page data embeds, so that every module's
// templates speak the same words: .V, .T "中文" "English", .When, .WhenP,
// .Zone and .CanOperate read alike in each of them, and a module adds its
// own words beside these.
type Page struct {
	V *module.View
}

// T picks the page's language; Chinese is written first because it is
// the console's first language.
func (p Page) T(zh, en string) string { return p.V.Zh(zh, en) }

// When prints a time in the console's zone, for a column whose head
// names the zone (View.TimeHead) or a page that says it once (Zone).
func (p Page) When(t time.Time) string { return web.Time(t) }

// WhenP is When of a time that may not be there yet ("—").
func (p Page) WhenP(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return web.Time(*t)
}

// Zone names the zone When prints in, in the page's language.
func (p Page) Zone() string { return web.ZoneLabel(p.V.Lang) }

// WhenZ is a time outside a time column (a detail's line): with its zone
// named after it, "—" when it is not there.
func (p Page) WhenZ(t any) string { return web.TimeZoned(p.V.Lang, t) }

// CanOperate says whether to offer the page's forms: the console refuses
// their posts to a viewer anyway, so a viewer should not see them.
func (p Page) CanOperate() bool { return p.V.Can(module.RoleOperator) }

// Redirect ends a form post by sending the browser to to (a path without
// a query) with the outcome, flash or errText, as the console's redirect
// messages, which it shows on that page; a reload then shows the page
// again rather than posting the form twice. It returns what a page
// handler returns when it has written the response itself.
func Redirect(w http.ResponseWriter, r *http.Request, to, flash, errText string) (*module.Rendered, error) {
	q := url.Values{}
	if flash != "" {
		q.Set("flash", flash)
	}
	if errText != "" {
		q.Set("err", errText)
	}
	if len(q) > 0 {
		to += "?" + q.Encode()
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
	return nil, nil
}

// Query starts reading the query of a page that Redirect may return to:
// the redirect messages (flash, err) are taken besides known, and any
// other parameter is refused as web.NewQuery refuses it.
func Query(r *http.Request, known ...string) *web.Query {
	return web.NewQuery(r, append([]string{"flash", "err"}, known...)...)
}

// Word says code in the page's language by a module's table of words
// ({Chinese, English} by code), or as zh and en where the table has none:
// an operator reads words, never a code the module stores.
func Word(v *module.View, table map[string][2]string, code, zh, en string) string {
	if w, ok := table[code]; ok {
		return v.Zh(w[0], w[1])
	}
	return v.Zh(zh, en)
}
