package payment

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
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

// site is the payment console: the lists are in the navigation, a
// payment or a refund is reached from its list or a search.
func (m *Module[TTx]) site() console.Site {
	v, o := module.RoleViewer, module.RoleOperator
	return console.Site{
		{Pattern: "GET /payments", Role: v, Handle: m.pagePayments, ZH: "支付单", EN: "Payments"},
		{Pattern: "GET /payments/{no}", Role: v, Handle: m.pagePayment},
		{Pattern: "POST /payments/{no}/refund", Role: o, Handle: m.pageRefund},
		{Pattern: "POST /payments/{no}/query", Role: o, Handle: m.pageQuery},
		{Pattern: "GET /payment-refunds", Role: v, Handle: m.pageRefunds, ZH: "退款", EN: "Refunds"},
		{Pattern: "GET /payment-refunds/{no}", Role: v, Handle: m.pageRefundDetail},
		{Pattern: "GET /payment-queues", Role: v, Handle: m.pageQueues, ZH: "待处理", EN: "Queues"},
	}
}

// Nav implements module.Web.
func (m *Module[TTx]) Nav() []module.NavItem { return m.site().Nav() }

// Pages implements module.Web.
func (m *Module[TTx]) Pages() []module.Page { return m.site().Pages() }

// Group implements module.Grouper.
func (m *Module[TTx]) Group() module.Group {
	return module.Group{ZH: "支付", EN: "Payments", Order: 50}
}

// Home implements module.Homer: unknown refunds, manual reviews, open
// discrepancies and their amount, the oldest unbooked payment, refused
// callbacks.
func (m *Module[TTx]) Home(ctx context.Context) ([]module.Stat, error) {
	h, err := m.Health(ctx)
	if err != nil {
		return nil, err
	}
	lvl := func(bad bool) module.Level {
		if bad {
			return module.LevelWarn
		}
		return module.LevelOK
	}
	amount := 0.0
	for _, a := range h.DiscrepancyAmount {
		amount += float64(a) / 100 // shown in major units of two-decimal currencies
	}
	return []module.Stat{
		{Key: "refunds_unknown", ZH: "退款结果未知", EN: "Refunds unknown", Value: float64(h.RefundsUnknown), UnitZH: "笔", UnitEN: "refunds",
			Level: lvl(h.RefundsUnknown > 0), Link: "/payment-refunds?state=unknown"},
		{Key: "manual", ZH: "人工核验", EN: "Manual review", Value: float64(h.PaymentsManual + h.RefundsManual), UnitZH: "笔", UnitEN: "items",
			Level: lvl(h.PaymentsManual+h.RefundsManual > 0), Link: "/payment-queues"},
		{Key: "discrepancies", ZH: "未处理对账差异", EN: "Open discrepancies", Value: float64(h.Discrepancies), UnitZH: "笔", UnitEN: "items",
			Level: lvl(h.Discrepancies > 0), Link: "/recon/discrepancies?reconciler=payment.channel"},
		{Key: "discrepancy_amount", ZH: "差异金额", EN: "Discrepancy amount", Value: amount, UnitZH: "元", UnitEN: "CNY",
			Level: lvl(amount > 0), Link: "/recon/discrepancies?reconciler=payment.channel"},
		{Key: "oldest_unbooked", ZH: "最老未记账", EN: "Oldest unbooked", Value: h.OldestUnposted.Seconds(), UnitZH: "秒", UnitEN: "s",
			Level: lvl(h.OldestUnposted > 5*time.Minute), Link: "/payments?state=paid"},
		{Key: "refused_callbacks", ZH: "被拒回调", EN: "Refused callbacks", Value: float64(h.SecurityRefusals), UnitZH: "次", UnitEN: "callbacks",
			Level: module.LevelOK},
	}, nil
}

// Search implements module.Searcher: payment numbers, refund numbers and
// channel transaction (or refund) ids.
func (m *Module[TTx]) Search(ctx context.Context, q string) ([]module.Hit, error) {
	if q == "" || len(q) > 64 {
		return []module.Hit{}, nil
	}
	hits := []module.Hit{}
	rows, err := m.db.Query(ctx, m.q.Get("PaymentSearch"), q)
	ps, err := collect(rows, err)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		hits = append(hits, module.Hit{KindZH: "支付单", KindEN: "payment", Title: p[0] + " · " + StateWord(p[1], "zh"), Path: "/payments/" + p[0]})
	}
	rows, err = m.db.Query(ctx, m.q.Get("RefundSearch"), q)
	rs, err := collect(rows, err)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		hits = append(hits, module.Hit{KindZH: "退款单", KindEN: "refund", Title: r[0] + " · " + refundWord(r[1], "zh"), Path: "/payment-refunds/" + r[0]})
	}
	return hits, nil
}

func collect(rows interface {
	Next() bool
	Scan(...any) error
	Close()
	Err() error
}, err error) ([][2]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var a, b string
		if err := rows.Scan(&a, &b); err != nil {
			return nil, err
		}
		out = append(out, [2]string{a, b})
	}
	return out, rows.Err()
}

var refundWords = map[string]words{
	RefundProcessing: {"退款处理中", "in progress"}, RefundDone: {"已退款", "refunded"}, RefundUnknown: {"结果未知", "outcome unknown"},
	RefundManual: {"人工核验", "manual review"}, RefundFailed: {"退款失败", "refused"}, "": {"—", "—"},
}

func refundWord(s, lang string) string { return pick(refundWords, s, lang) }

var actionWords = map[string]words{
	"capture": {"支付入账", "capture"}, "late_receipt": {"关闭后到账", "late receipt"}, "refund_start": {"退款在途", "refund sent"},
	"refund_settle": {"退款完成", "refund settled"}, "refund_reversal": {"退款冲正", "refund reversed"}, "capture_reversal": {"入账冲正", "capture reversed"},
	"fee": {"渠道手续费", "channel fee"}, "fee_return": {"手续费退回", "fee returned"},
}

// page is what every payment template gets: the console's envelope and
// the payment words.
type page struct{ console.Page }

func (p page) Word(s string) string       { return StateWord(s, p.V.Lang) }
func (p page) RefundWord(s string) string { return refundWord(s, p.V.Lang) }
func (p page) Outcome(s string) string    { return pick(outcomeWords, s, p.V.Lang) }
func (p page) Channel(s string) string    { return pick(channelWords, s, p.V.Lang) }
func (p page) Action(s string) string     { return pick(actionWords, s, p.V.Lang) }

// Why says a state history's reason in words (historyReasons); a
// person's own reason reads as typed.
func (p page) Why(s string) string            { return mweb.ReasonWord(p.V.Lang, Name, s, nil) }
func (p page) Money(a int64, c string) string { return Money(a, c) }
func (p page) Seconds(d time.Duration) string {
	if d <= 0 {
		return p.T("无", "none")
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 0, 64) + p.T(" 秒", " s")
}
func (p page) Level(s string) string {
	switch s {
	case PayPaid, RefundDone:
		return "ok"
	case PayManual, RefundUnknown, RefundFailed:
		return "warn"
	}
	return ""
}

// With hands a sub-template its rows with the page's helpers.
func (p page) With(rows []*Refund) any {
	return struct {
		page
		Rows []*Refund
	}{p, rows}
}

// Money formats minor units with the currency ("1,288.00 CNY"); every
// currency the channels settle here has two decimals.
func Money(a int64, currency string) string {
	neg := a < 0
	if neg {
		a = -a
	}
	s := strconv.FormatInt(a/100, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	out := fmt.Sprintf("%s.%02d %s", b.String(), a%100, currency)
	if neg {
		return "-" + out
	}
	return out
}

// parseYuan reads "12.34" into minor units, refusing more than two
// decimals, signs, exponents and anything over maxAmount.
func parseYuan(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(whole) > 13 || len(frac) > 2 {
		return 0, false
	}
	for _, c := range whole + frac {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	for len(frac) < 2 {
		frac += "0"
	}
	w, _ := strconv.ParseInt(whole, 10, 64)
	f, _ := strconv.ParseInt(frac, 10, 64)
	v := w*100 + f
	return v, validAmount(v)
}

var payStates = []string{PayPending, PayPaid, PayClosed, PayManual}
var refundStates = []string{RefundProcessing, RefundDone, RefundUnknown, RefundManual, RefundFailed}

func (m *Module[TTx]) pagePayments(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	q := mweb.NewQuery(r, "state", "after")
	state := states(q, payStates...)
	after := q.Get("after")
	if after != "" && !numberRE40.MatchString(after) {
		q.Fail(perr(ErrInvalid, "bad cursor"))
	}
	if q.Err != nil {
		return nil, q.Err
	}
	ps, err := m.Payments(r.Context(), state, after, 50)
	if err != nil {
		return nil, err
	}
	h, err := m.Health(r.Context())
	if err != nil {
		return nil, err
	}
	next := ""
	if len(ps) == 50 {
		next = ps[len(ps)-1].PaymentNo
	}
	data := struct {
		page
		State, Next string
		States      []string
		Payments    []*Payment
		H           *Health
	}{page{console.Page{V: v}}, state, next, payStates, ps, h}
	return pageTemplates.Render("payments", v.Zh("支付单", "Payments"), "/payments", data)
}

func (m *Module[TTx]) pagePayment(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	if q := console.Query(r); q.Err != nil {
		return nil, q.Err
	}
	no, err := pathNo(r)
	if err != nil {
		return nil, err
	}
	d, err := m.Detail(r.Context(), no)
	if err != nil {
		return nil, err
	}
	left := d.Payment.AmountMinor - d.Payment.RefundReserved
	data := struct {
		page
		D          *PaymentDetail
		Refundable bool
		Left       int64
		RequestID  string
	}{page{console.Page{V: v}}, d, (d.Payment.State == PayPaid || d.Payment.State == PayManual) && left > 0, left, newRequestID()}
	return pageTemplates.Render("payment", v.Zh("支付单", "Payment")+" "+no, "/payments", data)
}

// newRequestID names one refund form: submitting that form twice finds
// the same refund.
func newRequestID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "web-" + hex.EncodeToString(b)
}

func (m *Module[TTx]) pageRefund(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	no, err := pathNo(r)
	if err != nil {
		return nil, err
	}
	back := "/payments/" + no
	amount, okAmount := parseYuan(r.PostFormValue("amount"))
	if !okAmount {
		return console.Redirect(w, r, back, "", v.Zh("退款金额须为正数，最多两位小数", "The amount must be positive with at most two decimals"))
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	ctx := keel.WithActor(r.Context(), v.Actor)
	ref, err := m.CreateRefund(ctx, no, RefundRequest{RequestID: r.PostFormValue("request_id"), AmountMinor: amount, Reason: reason})
	switch {
	case isProblem(err, ErrRefundExceeds):
		return console.Redirect(w, r, back, "", v.Zh("退款总额不能超过实付金额", "Refunds cannot exceed the amount paid"))
	case isProblem(err, ErrNotRefundable):
		return console.Redirect(w, r, back, "", v.Zh("该支付单当前不能退款", "This payment cannot be refunded now"))
	case isProblem(err, ErrInvalid), isProblem(err, ErrRequestConflict):
		return console.Redirect(w, r, back, "", v.Zh("退款请求无效，请刷新页面后重试", "The refund request is invalid; reload and try again"))
	case err != nil:
		return nil, err
	}
	return console.Redirect(w, r, back, v.Zh("已发起退款 ", "Refund sent: ")+ref.RefundNo, "")
}

func (m *Module[TTx]) pageQuery(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	no, err := pathNo(r)
	if err != nil {
		return nil, err
	}
	back := "/payments/" + no
	st, err := m.QueryPayment(keel.WithActor(r.Context(), v.Actor), no)
	if err != nil {
		return console.Redirect(w, r, back, "", v.Zh("渠道暂未给出结果，稍后会自动再查", "The channel did not answer; it will be queried again"))
	}
	return console.Redirect(w, r, back, v.Zh("查单完成：", "Queried: ")+StateWord(st, v.Lang), "")
}

func (m *Module[TTx]) pageRefunds(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	q := mweb.NewQuery(r, "state")
	state := states(q, refundStates...)
	if q.Err != nil {
		return nil, q.Err
	}
	rs, err := m.Refunds(r.Context(), state, "", "", 100)
	if err != nil {
		return nil, err
	}
	data := struct {
		page
		State   string
		States  []string
		Refunds []*Refund
	}{page{console.Page{V: v}}, state, refundStates, rs}
	return pageTemplates.Render("refunds", v.Zh("退款", "Refunds"), "/payment-refunds", data)
}

func (m *Module[TTx]) pageRefundDetail(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	if q := mweb.NewQuery(r); q.Err != nil {
		return nil, q.Err
	}
	no, err := pathNo(r)
	if err != nil {
		return nil, err
	}
	ref, err := m.Refund(r.Context(), no)
	if err != nil {
		return nil, err
	}
	h, err := m.RefundHistory(r.Context(), no)
	if err != nil {
		return nil, err
	}
	data := struct {
		page
		R *Refund
		H []Transition
	}{page{console.Page{V: v}}, ref, h}
	return pageTemplates.Render("refund", v.Zh("退款", "Refund")+" "+no, "/payment-refunds", data)
}

func (m *Module[TTx]) pageQueues(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	if q := mweb.NewQuery(r); q.Err != nil {
		return nil, q.Err
	}
	manual, err := m.Payments(r.Context(), PayManual, "", 100)
	if err != nil {
		return nil, err
	}
	unknown, err := m.Refunds(r.Context(), RefundUnknown, "", "", 100)
	if err != nil {
		return nil, err
	}
	mr, err := m.Refunds(r.Context(), RefundManual, "", "", 100)
	if err != nil {
		return nil, err
	}
	data := struct {
		page
		Manual        []*Payment
		Unknown       []*Refund
		ManualRefunds []*Refund
	}{page{console.Page{V: v}}, manual, unknown, mr}
	return pageTemplates.Render("queues", v.Zh("待处理队列", "Queues"), "/payment-queues", data)
}
