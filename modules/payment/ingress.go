package payment

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/modules/payment/channel"
)

// CallbackPattern is where the channels send their notifications: public
// (a channel holds no bearer token), authenticated by the channel's
// signature instead.
const CallbackPattern = "POST /payment/notify/{channel}"

// CallbackPath is the notification URL path of a channel.
func CallbackPath(k channel.Kind) string { return "/payment/notify/" + string(k) }

// Ingress implements module.Ingress: the server mounts the callback
// receiver without its bearer-token check.
func (m *Module[TTx]) Ingress() []module.Endpoint {
	return []module.Endpoint{{Pattern: CallbackPattern, Handler: http.HandlerFunc(m.serveCallback)}}
}

// CallbackHandler serves the callback routes alone (tests, benchmarks and
// a receiver on a listener of its own).
func (m *Module[TTx]) CallbackHandler() http.Handler {
	mux := http.NewServeMux()
	for _, e := range m.Ingress() {
		mux.Handle(e.Pattern, e.Handler)
	}
	return mux
}

// refusal is a callback refused before any business change.
type refusal struct {
	status int
	reason string
	detail string
}

func refuseFor(err error) refusal {
	switch {
	case errors.Is(err, channel.ErrSignature):
		return refusal{http.StatusUnauthorized, "signature", "signature does not verify"}
	case errors.Is(err, channel.ErrSkew):
		return refusal{http.StatusUnauthorized, "skew", "timestamp outside the allowed window"}
	case errors.Is(err, channel.ErrUnknownSerial):
		return refusal{http.StatusUnauthorized, "unknown_serial", "unknown platform certificate serial"}
	case errors.Is(err, channel.ErrDecrypt):
		return refusal{http.StatusBadRequest, "decrypt", "resource does not decrypt"}
	case errors.Is(err, channel.ErrMalformed):
		return refusal{http.StatusBadRequest, "malformed", "malformed notification"}
	}
	return refusal{http.StatusBadRequest, "verify", "notification not verified"}
}

func (m *Module[TTx]) serveCallback(w http.ResponseWriter, r *http.Request) {
	ctx := keel.WithActor(r.Context(), "channel:"+r.PathValue("channel"))
	kind := channel.Kind(r.PathValue("channel"))
	mc, ok := m.merchant(kind)
	if !ok || mc.Channel == nil || mc.Channel.Verifier == nil {
		// No verifier to answer in the channel's words: a problem.
		m.refuse(ctx, string(kind), r, nil, refusal{http.StatusNotFound, "unknown_channel", "no such channel"})
		writeProblem(w, module.Errorf(http.StatusNotFound, "payment_channel_unknown", "no channel %q is configured", kind))
		return
	}
	v := mc.Channel.Verifier
	fail := func(body []byte, f refusal) {
		m.refuse(ctx, string(kind), r, body, f)
		v.Fail(w, f.status, f.detail)
	}
	// The raw body, read whole and bounded before anything parses it: the
	// signature is over these bytes.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(m.set.MaxBody)))
	if err != nil {
		fail(body, refusal{http.StatusRequestEntityTooLarge, "oversized", "body over the limit or unreadable"})
		return
	}
	if !utf8.Valid(body) {
		fail(body, refusal{http.StatusBadRequest, "encoding", "body is not UTF-8"})
		return
	}
	n, err := v.Verify(ctx, r.Header, body)
	if err != nil {
		fail(body, refuseFor(err))
		return
	}
	if f, bad := m.checkNotice(mc, n); bad {
		fail(body, f)
		return
	}
	if n.Event == channel.EventRefund && n.AmountMinor == 0 {
		q, err := m.confirmRefund(ctx, mc, n)
		if err != nil {
			// Nothing settles on a total: the channel notifies again, and
			// the refund's own query schedule goes on meanwhile.
			m.Log.Warn("payment refund notice not confirmed by the refund query", "channel", kind, "refund", n.OutRefundNo, "err", err)
			v.Fail(w, http.StatusServiceUnavailable, "refund not confirmed yet")
			return
		}
		n = q
	}
	ev := evidence{source: "callback", digest: digest(body), body: desensitise(body), at: m.Now()}
	outcome, detail, err := m.applyFast(ctx, n, ev)
	switch {
	case isProblem(err, ErrNoPayment) || isProblem(err, ErrNoRefund):
		fail(body, refusal{http.StatusNotFound, "unknown_order", err.Error()})
		return
	case err != nil:
		// Not committed: the channel retries, and the retry finds the
		// same state.
		m.Log.Error("payment callback", "channel", kind, "payment", n.OutTradeNo, "err", err)
		v.Fail(w, http.StatusInternalServerError, "temporarily unavailable")
		return
	}
	m.met.callbacks.WithLabelValues(string(kind), outcome).Inc()
	switch outcome {
	case OutcomeMismatch:
		m.met.mismatch.WithLabelValues(string(kind)).Inc()
		m.Log.Warn("payment callback disagrees with the order", "channel", kind, "payment", n.OutTradeNo, "detail", detail)
		v.Fail(w, http.StatusBadRequest, "fields disagree with the order")
		return
	case OutcomeDuplicate:
		m.met.duplicate.WithLabelValues(string(kind)).Inc()
	}
	v.Ack(w)
}

// checkNotice refuses what a verified notice may not carry: another
// merchant, amounts out of range, a currency that is no ISO 4217 code, a
// number we never issue.
func (m *Module[TTx]) checkNotice(mc *Merchant, n *channel.Notice) (refusal, bool) {
	bad := func(reason, detail string) (refusal, bool) {
		return refusal{http.StatusBadRequest, reason, detail}, true
	}
	switch {
	case n == nil:
		return bad("malformed", "no notice")
	case n.Channel != mc.Kind:
		return bad("unknown_merchant", "notice of another channel")
	case n.MerchantID != mc.MerchantID:
		return bad("unknown_merchant", "merchant "+n.MerchantID+" is not ours")
	case n.AppID != "" && mc.AppID != "" && n.AppID != mc.AppID:
		return bad("unknown_merchant", "app "+n.AppID+" is not ours")
	case !numberRE.MatchString(n.OutTradeNo):
		return bad("malformed", "payment number is not one we issue")
	case n.Event == channel.EventRefund && !numberRE.MatchString(n.OutRefundNo):
		return bad("malformed", "refund number is not one we issue")
	case n.Event != channel.EventPayment && n.Event != channel.EventRefund:
		return bad("malformed", "unknown event")
	case n.AmountMinor < 0 || n.AmountMinor > maxAmount || (n.AmountMinor == 0 && n.Event != channel.EventRefund):
		// A refund notice may state no amount of its own (Alipay's carries
		// the trade's cumulative refund): confirmRefund asks the channel.
		return bad("amount", "amount out of range")
	case !currencyRE.MatchString(n.Currency):
		return bad("currency", "currency is not an ISO 4217 code")
	}
	return refusal{}, false
}

// confirmRefund completes a verified refund notice that states no amount of
// its own with the channel's refund query under the same refund number:
// the refund settles only on the amount, currency and state the channel
// reports for that refund, never on the trade's cumulative total.
func (m *Module[TTx]) confirmRefund(ctx context.Context, mc *Merchant, n *channel.Notice) (*channel.Notice, error) {
	if mc.Channel.Client == nil {
		return nil, errors.New("no channel client to query the refund with")
	}
	q, err := mc.Channel.Client.QueryRefund(ctx, n.OutTradeNo, n.OutRefundNo)
	if err != nil {
		return nil, err
	}
	switch {
	case q.OutRefundNo != n.OutRefundNo || q.OutTradeNo != n.OutTradeNo:
		return nil, fmt.Errorf("the query answered for refund %s of %s", q.OutRefundNo, q.OutTradeNo)
	case q.State != channel.StateRefunded:
		return nil, fmt.Errorf("the channel reports the refund %s", q.State)
	case !validAmount(q.AmountMinor) || !currencyRE.MatchString(q.Currency):
		return nil, fmt.Errorf("the query reports %d %s", q.AmountMinor, q.Currency)
	}
	c := *n
	c.AmountMinor, c.Currency, c.State = q.AmountMinor, q.Currency, q.State
	if q.RefundID != "" {
		c.RefundID = q.RefundID
	}
	if !q.At.IsZero() {
		c.At = q.At
	}
	return &c, nil
}

// apply applies a verified notice in one transaction and, for a
// disagreement, asks reconciliation to run so the discrepancy opens.
func (m *Module[TTx]) apply(ctx context.Context, n *channel.Notice, ev evidence) (outcome, detail string, err error) {
	err = m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		if n.Event == channel.EventRefund {
			outcome, detail, err = m.applyRefundNotice(ctx, tx, n, ev)
		} else {
			outcome, detail, err = m.applyPayment(ctx, tx, n, ev)
		}
		if err != nil || outcome != OutcomeMismatch {
			return err
		}
		return m.askRecon(ctx, tx)
	})
	return outcome, detail, err
}

// askRecon inserts a run of the callbacks reconciler in tx: the evidence
// row and the run that opens its discrepancy commit together.
func (m *Module[TTx]) askRecon(ctx context.Context, tx keelsql.Tx[TTx]) error {
	c := m.Engine().Load()
	if c == nil || m.recon == nil {
		return nil
	}
	_, err := c.InsertTx(ctx, tx.Native(), keelrecon.RunArgs{Reconciler: ReconCallbacks, Cutoff: m.Now()},
		&keel.InsertOpts{Queue: keel.DefaultQueue, MaxAttempts: 5})
	return err
}

// refuse records a refused callback in the security audit (its only
// write) and counts it.
func (m *Module[TTx]) refuse(ctx context.Context, kind string, r *http.Request, body []byte, f refusal) {
	m.met.refused.WithLabelValues(kind, f.reason).Inc()
	if _, err := m.db.Exec(ctx, m.q.Get("SecurityInsert"), kind, f.reason, f.detail, digest(body),
		desensitise(body), r.RemoteAddr, m.Now()); err != nil {
		m.Log.Error("payment security audit", "err", err)
	}
	m.Log.Warn("payment callback refused", "channel", kind, "reason", f.reason, "remote", r.RemoteAddr)
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// sensitive are the fields masked in stored bodies: buyer identities,
// signatures and encrypted resources (the digest of the raw body is kept
// for proof).
var sensitive = []string{"buyer", "payer", "openid", "sign", "ciphertext", "card", "phone", "mobile", "email", "name", "account"}

func isSensitive(k string) bool {
	k = strings.ToLower(k)
	for _, s := range sensitive {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

func mask(s string) string {
	r := []rune(s)
	if len(r) <= 4 {
		return "***"
	}
	return string(r[:2]) + "***" + string(r[len(r)-2:])
}

// maxStored bounds a stored body.
const maxStored = 8 << 10

// desensitise returns the body as stored: JSON or form fields named in
// sensitive masked, anything else not UTF-8 dropped, and at most maxStored
// bytes.
func desensitise(body []byte) string {
	if len(body) == 0 {
		return ""
	}
	if !utf8.Valid(body) {
		return "(not UTF-8, " + itoa(len(body)) + " bytes)"
	}
	var v any
	if json.Unmarshal(body, &v) == nil {
		if b, err := json.Marshal(maskJSON(v, "")); err == nil {
			return clip(string(b))
		}
	}
	if vals, err := url.ParseQuery(string(body)); err == nil && len(vals) > 0 && strings.Contains(string(body), "=") {
		for k, vs := range vals {
			if isSensitive(k) {
				for i := range vs {
					vs[i] = mask(vs[i])
				}
			}
		}
		return clip(vals.Encode())
	}
	return clip(string(body))
}

func maskJSON(v any, key string) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = maskJSON(x, k)
		}
		return t
	case []any:
		for i, x := range t {
			t[i] = maskJSON(x, key)
		}
		return t
	case string:
		if isSensitive(key) {
			return mask(t)
		}
	}
	return v
}

func clip(s string) string {
	if len(s) <= maxStored {
		return s
	}
	cut := maxStored
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
