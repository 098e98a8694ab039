package reservation

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"time"

	"github.com/keelwork/keel/module"
	mweb "github.com/keelwork/keel/module/web"
)

//go:embed templates/*.html
var templateFiles embed.FS

type pageTemplates struct{ t *template.Template }

func parseTemplates() (pageTemplates, error) {
	t, err := template.New("").Funcs(templateFuncs).ParseFS(templateFiles, "templates/*.html")
	return pageTemplates{t: t}, err
}

var templateFuncs = template.FuncMap{
	"dict": func(kv ...any) map[string]any {
		m := make(map[string]any, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			m[fmt.Sprint(kv[i])] = kv[i+1]
		}
		return m
	},
	"pct": func(part, whole int) int {
		if whole <= 0 {
			return 0
		}
		return part * 100 / whole
	},
}

// Nav implements module.Web.
func (m *Module[TTx]) Nav() []module.NavItem {
	return []module.NavItem{
		{Path: "/reservation/slots", ZH: "预约时段", EN: "Slots"},
		{Path: "/reservation/reservations", ZH: "预约记录", EN: "Reservations"},
		{Path: "/reservation/categories", ZH: "释放设置", EN: "Release settings"},
		{Path: "/reservation/runs", ZH: "释放任务", EN: "Release runs"},
	}
}

// Pages implements module.Web.
func (m *Module[TTx]) Pages() []module.Page {
	v, o, a := module.RoleViewer, module.RoleOperator, module.RoleAdmin
	return []module.Page{
		{Pattern: "GET /reservation/slots", Role: v, Handle: m.pageSlots},
		{Pattern: "GET /reservation/reservations", Role: v, Handle: m.pageReservations},
		{Pattern: "GET /reservation/reservations/{id}", Role: v, Handle: m.pageReservation},
		{Pattern: "POST /reservation/reservations/{id}/{action}", Role: o, Handle: m.pageReservationAction},
		{Pattern: "GET /reservation/categories", Role: v, Handle: m.pageCategories},
		{Pattern: "POST /reservation/categories/{id}", Role: a, Handle: m.pageCategorySave},
		{Pattern: "POST /reservation/policy", Role: a, Handle: m.pagePolicySave},
		{Pattern: "POST /reservation/users/{action}", Role: a, Handle: m.pageUserAction},
		{Pattern: "GET /reservation/runs", Role: v, Handle: m.pageRuns},
		{Pattern: "POST /reservation/runs", Role: o, Handle: m.pageRunNow},
		{Pattern: "POST /reservation/dead-letters/{id}/requeue", Role: o, Handle: m.pageRequeue},
		{Pattern: "POST /reservation/invariant/repair", Role: a, Handle: m.pageRepair},
	}
}

// pageBase is what every page's template gets: the view, the dead-letter
// badge, the business zone and the words.
type pageBase struct {
	V    *module.View
	Dead int
	Path string
	zone *time.Location
}

func (m *Module[TTx]) base(r *http.Request, v *module.View) pageBase {
	b := pageBase{V: v, Path: r.URL.RequestURI(), zone: m.set.zone}
	if n, err := m.DeadLetterCount(r.Context()); err == nil {
		b.Dead = n
	}
	return b
}

// T picks the view's language.
func (b pageBase) T(zh, en string) string { return b.V.Zh(zh, en) }

// When shows a time in the business zone.
func (b pageBase) When(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(b.zone).Format("2006-01-02 15:04:05")
}

// WhenP is When for optional times.
func (b pageBase) WhenP(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return b.When(*t)
}

// Zone names the business zone.
func (b pageBase) Zone() string { return b.zone.String() }

// TimeHead is the head of a column of times shown by When: the name with
// the business zone.
func (b pageBase) TimeHead(zh, en string) string { return mweb.TimeHead(b.V.Lang, zh, en, b.zone) }

func (b pageBase) State(s State) string {
	w, ok := stateWords[s]
	if !ok {
		return string(s)
	}
	return b.V.Zh(w[0], w[1])
}

func (b pageBase) StateClass(s State) string { return stateClass[s] }

func (b pageBase) Mode(md Mode) string {
	w, ok := modeWords[md]
	if !ok {
		return string(md)
	}
	return b.V.Zh(w[0], w[1])
}

func (b pageBase) Kind(k string) string     { return word(kindWords, k, b.V.Lang) }
func (b pageBase) Delivery(s string) string { return word(deliveryWords, s, b.V.Lang) }
func (b pageBase) Wait(s string) string     { return word(waitWords, s, b.V.Lang) }
func (b pageBase) RunKind(k string) string  { return word(runWords, k, b.V.Lang) }
func (b pageBase) States() []State          { return AllStates }
func (b pageBase) Modes() []Mode            { return []Mode{ModeOn, ModeDryRun, ModeOff} }
func (b pageBase) CanOperate() bool         { return b.V.Can(module.RoleOperator) }
func (b pageBase) CanAdmin() bool           { return b.V.Can(module.RoleAdmin) }

// ReasonText says a history reason the module wrote in words (a
// person's reason reads as typed).
func (b pageBase) ReasonText(r string) string { return mweb.ReasonWord(b.V.Lang, Name, r, nil) }

// Actor shows who acted in words for the system's own actors.
func (b pageBase) Actor(a string) string {
	switch a {
	case "system:reservation.scan":
		return b.V.Zh("系统·释放扫描", "system: scan")
	case "system:reservation.precise":
		return b.V.Zh("系统·定时释放", "system: scheduled release")
	case "system:reservation.assist":
		return b.V.Zh("系统·查询时释放", "system: release on read")
	case "system:reservation.compensation":
		return b.V.Zh("系统·补偿任务", "system: compensation")
	}
	return a
}

// Duration shows a run's duration.
func (b pageBase) Duration(r *Run) string {
	d := r.Duration()
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return d.Round(10 * time.Millisecond).String()
}

// render executes a page template into the console's layout.
func (m *Module[TTx]) render(name, title, nav string, data any) (*module.Rendered, error) {
	var buf bytes.Buffer
	if err := m.templates.t.ExecuteTemplate(&buf, name, data); err != nil {
		return nil, fmt.Errorf("rendering %s: %w", name, err)
	}
	return &module.Rendered{Title: title, Nav: nav, Body: template.HTML(buf.String())}, nil
}

// Bands shows bands in their editable form.
func (b pageBase) Bands(bands []Band) string { return FormatBands(bands) }
