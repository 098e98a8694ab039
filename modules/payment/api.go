package payment

import (
	"context"
	"net/http"
	"time"

	"github.com/keelwork/keel/module"
	mweb "github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/modules/payment/channel"
)

// APIPrefix is where the module's admin API lives.
const APIPrefix = "/api/v1/payment"

// Routes implements module.Web. Reconciliation runs, discrepancies and
// their approvals are the server's recon API (docs/reconciliation.md).
func (m *Module[TTx]) Routes() []module.Route {
	v, o := module.RoleViewer, module.RoleOperator
	return []module.Route{
		{Pattern: "GET " + APIPrefix + "/payments", Role: v, Handle: m.apiPayments},
		{Pattern: "POST " + APIPrefix + "/payments", Role: o, Handle: m.apiCreatePayment},
		{Pattern: "GET " + APIPrefix + "/payments/{no}", Role: v, Handle: m.apiPayment},
		{Pattern: "POST " + APIPrefix + "/payments/{no}/query", Role: o, Handle: m.apiQuery},
		{Pattern: "POST " + APIPrefix + "/payments/{no}/refunds", Role: o, Handle: m.apiRefund},
		{Pattern: "GET " + APIPrefix + "/refunds", Role: v, Handle: m.apiRefunds},
		{Pattern: "GET " + APIPrefix + "/refunds/{no}", Role: v, Handle: m.apiRefundGet},
		{Pattern: "POST " + APIPrefix + "/bills", Role: o, Handle: m.apiBill},
		{Pattern: "GET " + APIPrefix + "/health", Role: v, Handle: m.apiHealth},
		{Pattern: "GET " + APIPrefix + "/security", Role: v, Handle: m.apiSecurity},
	}
}

func pathNo(r *http.Request) (string, error) {
	no := r.PathValue("no")
	if !numberRE.MatchString(no) && !refundNoRE.MatchString(no) {
		return "", perr(ErrInvalid, "the number must be 6 to 40 letters, digits, '-' or '_'")
	}
	return no, nil
}

var refundNoRE = numberRE40

func states(q *mweb.Query, allowed ...string) string {
	s := q.Get("state")
	if s == "" {
		return ""
	}
	for _, a := range allowed {
		if s == a {
			return s
		}
	}
	q.Fail(perr(ErrInvalid, "state must be one of %v", allowed))
	return ""
}

func cursor(q *mweb.Query, kind string) string {
	c := q.After(kind)
	if c != "" && !numberRE40.MatchString(c) {
		q.Fail(perr(ErrInvalid, "bad cursor"))
		return ""
	}
	return c
}

func (m *Module[TTx]) apiPayments(w http.ResponseWriter, r *http.Request) (int, any, error) {
	q := mweb.NewQuery(r, "state", "after", "limit")
	state := states(q, PayPending, PayPaid, PayClosed, PayManual)
	after := cursor(q, "payment")
	limit := q.Limit(50)
	if q.Err != nil {
		return 0, nil, q.Err
	}
	ps, err := m.Payments(r.Context(), state, after, limit)
	if err != nil {
		return 0, nil, err
	}
	next := ""
	if len(ps) == limit {
		next = mweb.Cursor("payment", ps[len(ps)-1].PaymentNo)
	}
	return http.StatusOK, mweb.NewList(ps, next), nil
}

func (m *Module[TTx]) apiCreatePayment(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if q := mweb.NewQuery(r); q.Err != nil {
		return 0, nil, q.Err
	}
	var np NewPayment
	if err := module.Decode(w, r, &np); err != nil {
		return 0, nil, err
	}
	p, err := m.CreatePayment(r.Context(), np)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, p, nil
}

// PaymentDetail is a payment with everything that proves its state.
type PaymentDetail struct {
	Payment   *Payment     `json:"payment"`
	Order     *Order       `json:"order,omitempty"`
	History   []Transition `json:"history"`
	Callbacks []Callback   `json:"callbacks"`
	Refunds   []*Refund    `json:"refunds"`
	Journal   []Entry      `json:"journal"`
}

// Detail reads a payment with its history, evidence, refunds and entries.
func (m *Module[TTx]) Detail(ctx context.Context, no string) (*PaymentDetail, error) {
	p, err := m.Payment(ctx, no)
	if err != nil {
		return nil, err
	}
	d := &PaymentDetail{Payment: p}
	d.Order, _ = m.Order(ctx, p.OrderID)
	if d.History, err = m.PaymentHistory(ctx, no); err != nil {
		return nil, err
	}
	if d.Callbacks, err = m.Callbacks(ctx, no); err != nil {
		return nil, err
	}
	if d.Refunds, err = m.Refunds(ctx, "", no, "", 100); err != nil {
		return nil, err
	}
	if d.Journal, err = m.Journal(ctx, no); err != nil {
		return nil, err
	}
	return d, nil
}

func (m *Module[TTx]) apiPayment(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if q := mweb.NewQuery(r); q.Err != nil {
		return 0, nil, q.Err
	}
	no, err := pathNo(r)
	if err != nil {
		return 0, nil, err
	}
	d, err := m.Detail(r.Context(), no)
	return ok(d, err)
}

func ok(v any, err error) (int, any, error) {
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, v, nil
}

func (m *Module[TTx]) apiQuery(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if q := mweb.NewQuery(r); q.Err != nil {
		return 0, nil, q.Err
	}
	no, err := pathNo(r)
	if err != nil {
		return 0, nil, err
	}
	if _, err := m.Payment(r.Context(), no); err != nil {
		return 0, nil, err
	}
	st, err := m.QueryPayment(r.Context(), no)
	if err != nil {
		return 0, nil, module.Errorf(http.StatusBadGateway, "payment_channel_unavailable", "the channel did not answer: %v", err)
	}
	return http.StatusOK, map[string]string{"payment_no": no, "state": st}, nil
}

func (m *Module[TTx]) apiRefund(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if q := mweb.NewQuery(r); q.Err != nil {
		return 0, nil, q.Err
	}
	no, err := pathNo(r)
	if err != nil {
		return 0, nil, err
	}
	var rr RefundRequest
	if err := module.Decode(w, r, &rr); err != nil {
		return 0, nil, err
	}
	if _, err := m.Payment(r.Context(), no); err != nil {
		return 0, nil, err
	}
	ref, err := m.CreateRefund(r.Context(), no, rr)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, ref, nil
}

func (m *Module[TTx]) apiRefunds(w http.ResponseWriter, r *http.Request) (int, any, error) {
	q := mweb.NewQuery(r, "state", "payment", "after", "limit")
	state := states(q, RefundProcessing, RefundDone, RefundUnknown, RefundManual, RefundFailed)
	pay := q.Get("payment")
	if pay != "" && !numberRE.MatchString(pay) {
		q.Fail(perr(ErrInvalid, "payment must be a payment number"))
	}
	after := cursor(q, "refund")
	limit := q.Limit(50)
	if q.Err != nil {
		return 0, nil, q.Err
	}
	rs, err := m.Refunds(r.Context(), state, pay, after, limit)
	if err != nil {
		return 0, nil, err
	}
	next := ""
	if len(rs) == limit {
		next = mweb.Cursor("refund", rs[len(rs)-1].RefundNo)
	}
	return http.StatusOK, mweb.NewList(rs, next), nil
}

// RefundDetail is a refund with its history.
type RefundDetail struct {
	Refund  *Refund      `json:"refund"`
	History []Transition `json:"history"`
}

func (m *Module[TTx]) apiRefundGet(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if q := mweb.NewQuery(r); q.Err != nil {
		return 0, nil, q.Err
	}
	no, err := pathNo(r)
	if err != nil {
		return 0, nil, err
	}
	ref, err := m.Refund(r.Context(), no)
	if err != nil {
		return 0, nil, err
	}
	h, err := m.RefundHistory(r.Context(), no)
	return ok(&RefundDetail{Refund: ref, History: h}, err)
}

func (m *Module[TTx]) apiBill(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if q := mweb.NewQuery(r); q.Err != nil {
		return 0, nil, q.Err
	}
	var body struct {
		Channel string `json:"channel"`
		Day     string `json:"day"`
	}
	if err := module.Decode(w, r, &body); err != nil {
		return 0, nil, err
	}
	day, err := time.ParseInLocation(time.DateOnly, body.Day, billZone)
	if err != nil {
		return 0, nil, perr(ErrInvalid, "day must be YYYY-MM-DD")
	}
	if _, ok := m.merchant(channel.Kind(body.Channel)); !ok {
		return 0, nil, perr(ErrNoChannel, "%q", body.Channel)
	}
	if day.After(m.Now()) {
		return 0, nil, perr(ErrInvalid, "the bill of a future day does not exist")
	}
	n, err := m.FetchBill(r.Context(), channel.Kind(body.Channel), day)
	if err != nil {
		return 0, nil, module.Errorf(http.StatusBadGateway, "payment_channel_unavailable", "%v", err)
	}
	return http.StatusOK, map[string]any{"channel": body.Channel, "day": body.Day, "lines": n}, nil
}

func (m *Module[TTx]) apiHealth(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if q := mweb.NewQuery(r); q.Err != nil {
		return 0, nil, q.Err
	}
	h, err := m.Health(r.Context())
	return ok(h, err)
}

func (m *Module[TTx]) apiSecurity(w http.ResponseWriter, r *http.Request) (int, any, error) {
	q := mweb.NewQuery(r, "after", "limit")
	after := q.AfterID("security")
	limit := q.Limit(50)
	if q.Err != nil {
		return 0, nil, q.Err
	}
	rows, err := m.SecurityAudit(r.Context(), after, limit)
	if err != nil {
		return 0, nil, err
	}
	next := ""
	if len(rows) == limit {
		next = mweb.IDCursor("security", rows[len(rows)-1].ID)
	}
	return http.StatusOK, mweb.NewList(rows, next), nil
}
