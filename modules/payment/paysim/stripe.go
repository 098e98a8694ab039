package paysim

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel/modules/payment/channel"
)

// StripeRetrySchedule approximates Stripe's webhook retries: Stripe
// publishes only "up to three days with an exponential back off", so the
// simulator doubles from one minute (about three days in all).
var StripeRetrySchedule = func() []time.Duration {
	var out []time.Duration
	for d := time.Minute; d <= 36*time.Hour; d *= 2 {
		out = append(out, d)
	}
	return out
}()

// stServer speaks the part of Stripe's REST API Keel uses, as JSON objects
// in Stripe's shapes, with Bearer API-key authentication.
type stServer struct {
	server
	s       *Sim
	apiKey  string
	secrets []string // webhook signing secrets; the last two sign during a roll (guarded by s.mu)
	account string
}

func newSTServer(s *Sim) *stServer {
	t := &stServer{s: s, apiKey: "sk_test_" + randomString(32), secrets: []string{"whsec_" + randomString(32)},
		account: "acct_" + randomString(16)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/payment_intents/search", t.authed(t.search))
	mux.HandleFunc("POST /v1/payment_intents/{id}/cancel", t.authed(t.cancel))
	mux.HandleFunc("POST /v1/refunds", t.authed(t.createRefund))
	mux.HandleFunc("GET /v1/refunds", t.authed(t.listRefunds))
	mux.HandleFunc("GET /v1/balance_transactions", t.authed(t.balance))
	t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return t
}

type stHandler func(rw http.ResponseWriter, r *http.Request, form url.Values)

func (t *stServer) authed(h stHandler) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+t.apiKey {
			t.s.reject()
			t.fail(rw, http.StatusUnauthorized, "invalid_request_error", "", "Invalid API Key provided")
			return
		}
		form := r.URL.Query()
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			f, err := url.ParseQuery(string(body))
			if err != nil {
				t.fail(rw, 400, "invalid_request_error", "parameter_invalid", "malformed form")
				return
			}
			form = f
		}
		h(rw, r, form)
	}
}

func (t *stServer) write(rw http.ResponseWriter, status int, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.Header().Set("Request-Id", "req_"+randomString(14))
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(v)
}

func (t *stServer) fail(rw http.ResponseWriter, status int, typ, code, msg string) {
	t.write(rw, status, map[string]any{"error": map[string]any{"type": typ, "code": code, "message": msg}})
}

func (t *stServer) refusal(rw http.ResponseWriter, f *refusal) {
	switch f {
	case refSystem:
		t.fail(rw, 500, "api_error", "", f.msg)
	case refNoTrade, refNoRefund:
		t.fail(rw, 404, "invalid_request_error", "resource_missing", f.msg)
	case refTooMuch:
		t.fail(rw, 400, "invalid_request_error", "amount_too_large", f.msg)
	case refBalance:
		t.fail(rw, 400, "invalid_request_error", "balance_insufficient", f.msg)
	default:
		t.fail(rw, 400, "invalid_request_error", "payment_intent_unexpected_state", f.msg)
	}
}

func expands(form url.Values) map[string]bool {
	out := map[string]bool{}
	for k, vs := range form {
		if k == "expand" || strings.HasPrefix(k, "expand[") {
			for _, v := range vs {
				out[v] = true
			}
		}
	}
	return out
}

func stStatus(tr trade) string {
	switch tr.state {
	case channel.StatePaid:
		return "succeeded"
	case channel.StateClosed:
		return "canceled"
	}
	return "requires_payment_method"
}

func (t *stServer) charge(tr trade) map[string]any {
	return map[string]any{"id": tr.chargeID, "object": "charge", "amount": tr.amount, "currency": strings.ToLower(tr.currency),
		"created": tr.paidAt.Unix(), "paid": true, "status": "succeeded", "payment_intent": tr.transactionID,
		"amount_refunded": tr.refunded}
}

func (t *stServer) intent(tr trade, expandCharge bool) map[string]any {
	pi := map[string]any{"id": tr.transactionID, "object": "payment_intent", "amount": tr.amount,
		"currency": strings.ToLower(tr.currency), "created": tr.created.Unix(), "status": stStatus(tr),
		"metadata": map[string]string{channel.StripeMetaTradeNo: tr.outTradeNo}, "livemode": false}
	if tr.state == channel.StatePaid {
		pi["amount_received"] = tr.amount
		pi["latest_charge"] = tr.chargeID
		if expandCharge {
			pi["latest_charge"] = t.charge(tr)
		}
	}
	return pi
}

func (t *stServer) refundObject(r refund, expandPI bool) map[string]any {
	out := map[string]any{"id": r.refundID, "object": "refund", "amount": r.amount, "created": r.created.Unix(),
		"payment_intent": r.transactionID,
		"metadata":       map[string]string{channel.StripeMetaTradeNo: r.outTradeNo, channel.StripeMetaRefundNo: r.outRefundNo}}
	t.s.mu.Lock()
	tr := *t.s.trades[key{channel.KindStripe, r.outTradeNo}]
	t.s.mu.Unlock()
	out["currency"], out["charge"] = strings.ToLower(tr.currency), tr.chargeID
	if expandPI {
		out["payment_intent"] = t.intent(tr, false)
	}
	switch r.state {
	case channel.StateRefunded:
		out["status"] = "succeeded"
	case channel.StateRefunding:
		out["status"] = "pending"
	default:
		out["status"] = "failed"
	}
	return out
}

var stQuery = regexp.MustCompile(`^metadata\['` + channel.StripeMetaTradeNo + `'\]:'([^'\\]*)'$`)

func (t *stServer) byIntent(id string) (trade, bool) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for k, tr := range t.s.trades {
		if k.kind == channel.KindStripe && tr.transactionID == id {
			return *tr, true
		}
	}
	return trade{}, false
}

func (t *stServer) search(rw http.ResponseWriter, _ *http.Request, form url.Values) {
	m := stQuery.FindStringSubmatch(form.Get("query"))
	if m == nil {
		t.fail(rw, 400, "invalid_request_error", "parameter_invalid", "unsupported search query")
		return
	}
	data := []any{}
	if tr, ok := t.s.findTrade(channel.KindStripe, m[1]); ok {
		data = append(data, t.intent(tr, expands(form)["data.latest_charge"]))
	}
	t.write(rw, 200, map[string]any{"object": "search_result", "data": data, "has_more": false, "next_page": nil,
		"url": "/v1/payment_intents/search"})
}

func (t *stServer) cancel(rw http.ResponseWriter, r *http.Request, _ url.Values) {
	tr, ok := t.byIntent(r.PathValue("id"))
	if !ok {
		t.refusal(rw, refNoTrade)
		return
	}
	if f := t.s.closeTrade(channel.KindStripe, tr.outTradeNo); f != nil {
		t.refusal(rw, f)
		return
	}
	tr, _ = t.byIntent(r.PathValue("id"))
	t.write(rw, 200, t.intent(tr, false))
}

func (t *stServer) createRefund(rw http.ResponseWriter, r *http.Request, form url.Values) {
	tr, ok := t.byIntent(form.Get("payment_intent"))
	amount, err := strconv.ParseInt(form.Get("amount"), 10, 64)
	no := form.Get("metadata[" + channel.StripeMetaRefundNo + "]")
	if no == "" {
		no = r.Header.Get("Idempotency-Key")
	}
	switch {
	case !ok:
		t.refusal(rw, refNoTrade)
		return
	case err != nil || no == "":
		t.fail(rw, 400, "invalid_request_error", "parameter_invalid", "amount and a refund number are required")
		return
	}
	rf, f, out := t.s.doRefund(channel.KindStripe, tr.outTradeNo, no, amount)
	switch {
	case out == hang:
		<-r.Context().Done()
		return
	case out == disconnect:
		cutConnection(rw)
		return
	case f != nil:
		t.refusal(rw, f)
		return
	}
	t.write(rw, 200, t.refundObject(*rf, false))
}

func (t *stServer) listRefunds(rw http.ResponseWriter, _ *http.Request, form url.Values) {
	tr, ok := t.byIntent(form.Get("payment_intent"))
	if !ok {
		t.refusal(rw, refNoTrade)
		return
	}
	t.s.mu.Lock()
	var rs []refund
	for k, r := range t.s.refunds {
		if k.kind == channel.KindStripe && r.outTradeNo == tr.outTradeNo {
			rs = append(rs, *r)
		}
	}
	unavailable := false
	for _, r := range rs {
		t.s.c.refundQueries[r.outRefundNo]++
	}
	for no, b := range t.s.behaviour {
		if b == Unavailable && t.s.refundTrade[no] == tr.outTradeNo {
			unavailable = true
			t.s.c.refundQueries[no]++
		}
	}
	t.s.mu.Unlock()
	if unavailable {
		t.refusal(rw, refSystem)
		return
	}
	data := []any{}
	for _, r := range rs {
		data = append(data, t.refundObject(r, false))
	}
	t.write(rw, 200, map[string]any{"object": "list", "data": data, "has_more": false, "url": "/v1/refunds"})
}

func (t *stServer) balance(rw http.ResponseWriter, _ *http.Request, form url.Values) {
	gte, err1 := strconv.ParseInt(form.Get("created[gte]"), 10, 64)
	lt, err2 := strconv.ParseInt(form.Get("created[lt]"), 10, 64)
	if err1 != nil || err2 != nil || lt-gte != 86400 {
		t.fail(rw, 400, "invalid_request_error", "parameter_invalid", "created[gte] and created[lt] must span one day")
		return
	}
	ex := expands(form)
	ev, injs := t.s.events(channel.KindStripe, time.Unix(gte, 0).UTC())
	data := []any{}
	for _, e := range ev {
		inj := applies(e, injs)
		if inj.Drop {
			continue
		}
		bt := map[string]any{"id": "txn_" + randomString(24), "object": "balance_transaction", "created": e.at.Unix(),
			"currency": strings.ToLower(e.t.currency), "status": "available", "reporting_category": "charge"}
		if e.r == nil {
			amt := e.t.amount + inj.DeltaMinor
			bt["type"], bt["amount"], bt["fee"], bt["net"] = "charge", amt, fee(amt), amt-fee(amt)
			src := any(e.t.chargeID)
			if ex["data.source"] {
				c := t.charge(*e.t)
				if ex["data.source.payment_intent"] {
					c["payment_intent"] = t.intent(*e.t, false)
				}
				src = c
			}
			bt["source"] = src
		} else {
			amt := e.r.amount + inj.DeltaMinor
			bt["type"], bt["amount"], bt["fee"], bt["net"], bt["reporting_category"] = "refund", -amt, int64(0), -amt, "refund"
			src := any(e.r.refundID)
			if ex["data.source"] {
				src = t.refundObject(*e.r, ex["data.source.payment_intent"])
			}
			bt["source"] = src
		}
		data = append(data, bt)
		if inj.Duplicate {
			data = append(data, bt)
		}
	}
	t.write(rw, 200, map[string]any{"object": "list", "data": data, "has_more": false, "url": "/v1/balance_transactions"})
}

// callback builds one webhook attempt: an event signed with every active
// secret (Stripe sends one v1 signature per secret while one is rolled).
func (t *stServer) callback(cb *callback) (http.Header, []byte, error) {
	t.s.mu.Lock()
	tr, ok := t.s.trades[key{channel.KindStripe, cb.outTradeNo}]
	var rf *refund
	if cb.outRefundNo != "" {
		rf = t.s.refunds[key{channel.KindStripe, cb.outRefundNo}]
	}
	secrets := append([]string(nil), t.secrets...)
	t.s.mu.Unlock()
	if !ok || (cb.outRefundNo != "" && rf == nil) {
		return nil, nil, fmt.Errorf("paysim: no stripe trade %q / refund %q", cb.outTradeNo, cb.outRefundNo)
	}
	typ, obj := "payment_intent.succeeded", any(nil)
	if rf != nil {
		typ, obj = "refund.updated", t.refundObject(*rf, false)
	} else {
		obj = t.intent(*tr, false)
	}
	body, _ := json.Marshal(map[string]any{"id": "evt_" + cb.notifyID[:24], "object": "event", "api_version": "2025-08-27.basil",
		"created": t.s.now().Unix(), "type": typ, "livemode": false, "pending_webhooks": 1, "data": map[string]any{"object": obj}})
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Stripe-Signature", StripeSignature(body, t.s.now(), activeSecrets(secrets)...))
	return h, body, nil
}

func activeSecrets(all []string) []string {
	if len(all) > 2 {
		return all[len(all)-2:]
	}
	return all
}

// StripeSignature is the Stripe-Signature header for payload at t: one v1
// HMAC-SHA256 of "t.payload" per secret, as Stripe publishes the scheme.
func StripeSignature(payload []byte, at time.Time, secrets ...string) string {
	ts := strconv.FormatInt(at.Unix(), 10)
	parts := []string{"t=" + ts}
	for _, s := range secrets {
		m := hmac.New(sha256.New, []byte(s))
		m.Write([]byte(ts + "."))
		m.Write(payload)
		parts = append(parts, "v1="+hex.EncodeToString(m.Sum(nil)))
	}
	return strings.Join(parts, ",")
}
