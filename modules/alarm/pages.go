package alarm

import (
	"context"
	"embed"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module"
	mweb "github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/module/web/console"
)

//go:embed templates/*.html
var templateFiles embed.FS

var pageTemplates = console.Parse(templateFiles, nil)

// site is the alarm console: the board, notices, silences and the storm
// panel are in the navigation, an instance is reached from the board.
func (m *Module[TTx]) site() console.Site {
	v, o := module.RoleViewer, module.RoleOperator
	return console.Site{
		{Pattern: "GET /alarm", Role: v, Handle: m.pageBoard, ZH: "告警看板", EN: "Alarm board"},
		{Pattern: "GET /alarm/instances/{id}", Role: v, Handle: m.pageInstance},
		{Pattern: "POST /alarm/instances/{id}/ack", Role: o, Handle: m.pageAck},
		{Pattern: "GET /alarm/notices", Role: v, Handle: m.pageNotices, ZH: "通知与工单", EN: "Notices and tickets"},
		{Pattern: "GET /alarm/silences", Role: v, Handle: m.pageSilences, ZH: "静默", EN: "Silences"},
		{Pattern: "GET /alarm/storm", Role: v, Handle: m.pageStorm, ZH: "风暴面板", EN: "Storm panel"},
	}
}

// Nav implements module.Web.
func (m *Module[TTx]) Nav() []module.NavItem { return m.site().Nav() }

// Pages implements module.Web.
func (m *Module[TTx]) Pages() []module.Page { return m.site().Pages() }

// Group implements module.Grouper.
func (m *Module[TTx]) Group() module.Group {
	return module.Group{ZH: "物联网告警", EN: "IoT alarms", Order: 50}
}

// Home implements module.Homer: firing by severity and the storm state.
func (m *Module[TTx]) Home(ctx context.Context) ([]module.Stat, error) {
	rows, err := m.DB.Query(ctx, m.q.Get("InstanceFiringCounts"))
	if err != nil {
		return nil, err
	}
	by := map[int]float64{}
	for rows.Next() {
		var s int
		var n float64
		if err := rows.Scan(&s, &n); err != nil {
			rows.Close()
			return nil, err
		}
		by[s] = n
	}
	rows.Close()
	lvl := func(n float64, bad bool) module.Level {
		if n == 0 {
			return module.LevelOK
		}
		if bad {
			return module.LevelBad
		}
		return module.LevelWarn
	}
	p := m.Pressure()
	storm := 0.0
	if p.Storm != nil {
		storm = 1
	}
	return []module.Stat{
		{Key: "alarm.firing.severe", ZH: "严重告警", EN: "Severe firing", Value: by[SevSevere], UnitZH: "条", UnitEN: "", Level: lvl(by[SevSevere], true), Link: "/alarm"},
		{Key: "alarm.firing.minor", ZH: "一般告警", EN: "Minor firing", Value: by[SevMinor], UnitZH: "条", Level: lvl(by[SevMinor], false), Link: "/alarm"},
		{Key: "alarm.firing.info", ZH: "提示", EN: "Info firing", Value: by[SevInfo], UnitZH: "条", Level: module.LevelOK, Link: "/alarm"},
		{Key: "alarm.storm", ZH: "告警风暴", EN: "Alarm storm", Value: storm, UnitZH: "场", UnitEN: "", Level: lvl(storm, true), Link: "/alarm/storm"},
		{Key: "alarm.backlog", ZH: "普通积压", EN: "Ordinary backlog", Value: float64(p.Backlog), UnitZH: "条", Level: module.Level(min(p.Level, 2)), Link: "/alarm/storm"},
	}, nil
}

// Search implements module.Searcher: a device id or an alarm instance id.
func (m *Module[TTx]) Search(ctx context.Context, q string) ([]module.Hit, error) {
	if q == "" || len(q) > 64 || !idPattern.MatchString(q) {
		return []module.Hit{}, nil
	}
	hits := []module.Hit{}
	list, err := m.instancesTx(ctx, m.DB, m.q.Get("InstanceSearch"), q)
	if err != nil {
		return nil, err
	}
	for _, i := range list {
		hits = append(hits, module.Hit{KindZH: "告警实例", KindEN: "alarm instance", Title: i.ID + " " + StateZH(i.State),
			Path: "/alarm/instances/" + url.PathEscape(i.ID)})
	}
	rows, err := m.DB.Query(ctx, m.q.Get("DeviceSearch"), q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, name, gw string
		var at time.Time
		if err := rows.Scan(&id, &name, &gw, &at); err != nil {
			return nil, err
		}
		hits = append(hits, module.Hit{KindZH: "设备", KindEN: "device", Title: id + " " + name, Path: "/alarm?device=" + url.QueryEscape(id)})
	}
	return hits, rows.Err()
}

type page struct{ console.Page }

func (p page) State(s string) string {
	if p.V.Lang == "en" {
		return StateEN(s)
	}
	return StateZH(s)
}
func (p page) Sev(s int) string {
	if p.V.Lang == "en" {
		return SeverityEN(s)
	}
	return SeverityZH(s)
}
func (p page) NState(s string) string { return p.V.Zh(NoticeStateZH(s), s) }
func (p page) Why(s string) string    { return HistoryReason(p.V.Lang, s) }
func (p page) NKind(s string) string  { return p.V.Zh(NoticeKindZH(s), s) }
func (p page) Num(v float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

type boardPage struct {
	page
	Device  string
	Severe  []*Instance
	Minor   []*Instance
	Info    []*Instance
	Closed  []*Instance
	Storm   Pressure
	Refresh int
}

func (m *Module[TTx]) pageBoard(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	q := console.Query(r, "device")
	dev := q.Text("device", 64)
	if q.Err != nil {
		return nil, q.Err
	}
	list, err := m.Instances(r.Context(), "", dev, "", 300)
	if err != nil {
		return nil, err
	}
	p := boardPage{page: page{console.Page{V: v}}, Device: dev, Storm: m.Pressure(), Refresh: 5}
	for _, i := range list {
		switch {
		case i.State == StRecovered:
			if len(p.Closed) < 30 {
				p.Closed = append(p.Closed, i)
			}
		case i.Severity >= SevSevere:
			p.Severe = append(p.Severe, i)
		case i.Severity == SevMinor:
			p.Minor = append(p.Minor, i)
		default:
			p.Info = append(p.Info, i)
		}
	}
	return pageTemplates.Render("board", v.Zh("告警看板", "Alarm board"), "/alarm", p)
}

type instancePage struct {
	page
	I        *Instance
	History  []HistoryEntry
	Notices  []*Notice
	Evidence []evidence
}

type evidence struct {
	Metric            string
	Boot, Seq         int64
	Value             float64
	DeviceAt, At, Rcv time.Time
	Flag, Lane        string
	Late              bool
}

func (m *Module[TTx]) pageInstance(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	if err := pageParams(r); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	i, err := m.InstanceByID(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if i == nil {
		return nil, mweb.NotFound("没有告警实例 %s", id)
	}
	p := instancePage{page: page{console.Page{V: v}}, I: i}
	if p.History, err = m.History(r.Context(), id); err != nil {
		return nil, err
	}
	if p.Notices, err = m.Notices(r.Context(), "", id, 50); err != nil {
		return nil, err
	}
	rows, err := m.DB.Query(r.Context(), m.q.Get("TelemetryOfDevice"), i.Device, 30)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var e evidence
		if err := rows.Scan(&e.Metric, &e.Boot, &e.Seq, &e.Value, &e.DeviceAt, &e.At, &e.Rcv, &e.Flag, &e.Lane, &e.Late); err != nil {
			return nil, err
		}
		p.Evidence = append(p.Evidence, e)
	}
	return pageTemplates.Render("instance", v.Zh("告警实例 ", "Alarm instance ")+id, "/alarm", p)
}

func (m *Module[TTx]) pageAck(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id := r.PathValue("id")
	comment := strings.TrimSpace(r.PostFormValue("comment"))
	target := "/alarm/instances/" + url.PathEscape(id)
	if err := m.Ack(keel.WithActor(r.Context(), v.Actor), id, v.Actor, comment); err != nil {
		return console.Redirect(w, r, target, "", v.Zh("确认失败：实例不在告警中", "Not acknowledged: the instance is not firing"))
	}
	return console.Redirect(w, r, target, v.Zh("已确认", "Acknowledged"), "")
}

type noticesPage struct {
	page
	Notices []*Notice
	Tickets []Ticket
	// SMS says whether the SMS channel is offered, and why not.
	SMS string
}

func (m *Module[TTx]) pageNotices(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	if err := pageParams(r); err != nil {
		return nil, err
	}
	n, err := m.Notices(r.Context(), "", "", 200)
	if err != nil {
		return nil, err
	}
	t, err := m.Tickets(r.Context(), 100)
	if err != nil {
		return nil, err
	}
	return pageTemplates.Render("notices", v.Zh("通知与工单", "Notices and tickets"), "/alarm/notices", noticesPage{page{console.Page{V: v}}, n, t, smsLine(m, v)})
}

func smsLine[TTx any](m *Module[TTx], v *module.View) string {
	_, why := m.SMSChannel()
	return v.Zh("短信通道：", "SMS channel: ") + v.Zh(why[0], why[1])
}

type silencesPage struct {
	page
	Silences []Silence
}

func (m *Module[TTx]) pageSilences(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	if err := pageParams(r); err != nil {
		return nil, err
	}
	s, err := m.Silences(r.Context(), 200)
	if err != nil {
		return nil, err
	}
	return pageTemplates.Render("silences", v.Zh("静默", "Silences"), "/alarm/silences", silencesPage{page{console.Page{V: v}}, s})
}

type stormPage struct {
	page
	P     StormPanelData
	Bars  []bar
	Ratio string
	Audit []auditEntry
}

// auditEntry is one line of the module's own audit log (alarm_audit).
type auditEntry struct {
	At                             time.Time
	Actor, Action, Subject, Detail string
}

// auditLog reads the newest n entries of alarm_audit.
func (m *Module[TTx]) auditLog(ctx context.Context, n int) ([]auditEntry, error) {
	rows, err := m.DB.Query(ctx, m.q.Get("AuditList"), n)
	if err != nil {
		return nil, fmt.Errorf("reading the alarm audit log: %w", err)
	}
	defer rows.Close()
	var out []auditEntry
	for rows.Next() {
		var e auditEntry
		if err := rows.Scan(&e.At, &e.Actor, &e.Action, &e.Subject, &e.Detail); err != nil {
			return nil, fmt.Errorf("reading the alarm audit log: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Action names an audited action in words; Detail says a detail the
// module wrote in the page's language.
func (p page) Action(a string) string { return mweb.ActionWord(p.V.Lang, auditAction(a)) }
func (p page) Detail(d string) string { return mweb.ReasonWord(p.V.Lang, Name, d, nil) }

type bar struct {
	Label string
	Value int64
	Pct   int
	Unit  string
}

func (m *Module[TTx]) pageStorm(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	if err := pageParams(r); err != nil {
		return nil, err
	}
	p := m.StormPanel(r.Context())
	sp := stormPage{page: page{console.Page{V: v}}, P: p, Ratio: fmt.Sprintf("%.1f", p.Compression)}
	audit, err := m.auditLog(r.Context(), 50)
	if err != nil {
		return nil, err
	}
	sp.Audit = audit
	top := max(p.Pressure.StormWater, p.Pressure.Backlog, 1)
	for _, b := range []struct {
		zh, en string
		n      int64
	}{{"普通积压", "Ordinary backlog", p.Pressure.Backlog}, {"低水位", "Low water", p.Pressure.LowWater},
		{"高水位", "High water", p.Pressure.HighWater}, {"风暴水位", "Storm water", p.Pressure.StormWater}} {
		sp.Bars = append(sp.Bars, bar{Label: v.Zh(b.zh, b.en), Value: b.n, Pct: int(b.n * 100 / top), Unit: v.Zh("条", "samples")})
	}
	return pageTemplates.Render("storm", v.Zh("风暴面板", "Storm panel"), "/alarm/storm", sp)
}

type rowsData struct {
	P page
	L []*Instance
}

// With pairs the page with a list for the rows template.
func (p page) With(l []*Instance) rowsData { return rowsData{P: p, L: l} }

// pageParams refuses parameters a page does not take: every alarm page
// may be where a form's redirect lands.
func pageParams(r *http.Request) error { return console.Query(r).Err }
