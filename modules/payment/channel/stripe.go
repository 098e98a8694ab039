package channel

// Stripe, through its official Go library (github.com/stripe/stripe-go/v82):
// webhook signatures with its webhook package, API calls with its client
// pointed at Config.BaseURL. Keel's numbers travel as metadata
// (out_trade_no on the PaymentIntent, out_refund_no on the Refund), since
// Stripe names objects by its own ids.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"
)

func init() { builders[KindStripe] = newStripe }

// Metadata keys carrying Keel's numbers on Stripe objects.
const (
	StripeMetaTradeNo  = "out_trade_no"
	StripeMetaRefundNo = "out_refund_no"
)

// defaultWebhookTolerance is Stripe's own default.
const defaultWebhookTolerance = 5 * time.Minute

type stripeChannel struct {
	cfg Config
	sc  *stripe.Client
}

type silentLogger struct{}

func (silentLogger) Debugf(string, ...any) {}
func (silentLogger) Infof(string, ...any)  {}
func (silentLogger) Warnf(string, ...any)  {}
func (silentLogger) Errorf(string, ...any) {}

func newStripe(_ context.Context, cfg Config) (*Channel, error) {
	switch {
	case cfg.APIKey == "":
		return nil, errors.New("channel: stripe: APIKey is required")
	case len(cfg.WebhookSecrets) == 0:
		return nil, errors.New("channel: stripe: at least one WebhookSecrets entry is required")
	}
	if cfg.WebhookTolerance <= 0 {
		cfg.WebhookTolerance = defaultWebhookTolerance
	}
	bc := &stripe.BackendConfig{
		HTTPClient: newHTTPClient(cfg),
		// The library's own retries would resend a refund after a timeout;
		// Keel decides about retries itself (query first).
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     silentLogger{},
		EnableTelemetry:   stripe.Bool(false),
	}
	if cfg.BaseURL != "" {
		bc.URL = stripe.String(strings.TrimRight(cfg.BaseURL, "/"))
	}
	s := &stripeChannel{cfg: cfg, sc: stripe.NewClient(cfg.APIKey, stripe.WithBackends(stripe.NewBackendsWithConfig(bc)))}
	return &Channel{Kind: KindStripe, Verifier: s, Client: s}, nil
}

// Verify checks the Stripe-Signature header against each configured
// secret (during a roll either may sign) within the tolerance, then maps
// payment_intent.* and refund.* events.
func (s *stripeChannel) Verify(_ context.Context, h http.Header, body []byte) (*Notice, error) {
	if len(body) == 0 || len(body) > maxNotification {
		return nil, fmt.Errorf("%w: body of %d bytes", ErrMalformed, len(body))
	}
	sig := h.Get("Stripe-Signature")
	var err error
	for _, secret := range s.cfg.WebhookSecrets {
		if err = webhook.ValidatePayloadWithTolerance(body, sig, secret, s.cfg.WebhookTolerance); err == nil {
			break
		}
		if errors.Is(err, webhook.ErrTooOld) {
			return nil, fmt.Errorf("%w: %v", ErrSkew, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSignature, err)
	}
	var ev stripe.Event
	if err := json.Unmarshal(body, &ev); err != nil || ev.Data == nil {
		return nil, fmt.Errorf("%w: event: %v", ErrMalformed, err)
	}
	var n *Notice
	switch {
	case strings.HasPrefix(string(ev.Type), "payment_intent."):
		var pi stripe.PaymentIntent
		if err := json.Unmarshal(ev.Data.Raw, &pi); err != nil {
			return nil, fmt.Errorf("%w: payment intent: %v", ErrMalformed, err)
		}
		n, err = s.paymentNotice(&pi)
	case strings.HasPrefix(string(ev.Type), "refund."), strings.HasPrefix(string(ev.Type), "charge.refund."):
		var re stripe.Refund
		if err := json.Unmarshal(ev.Data.Raw, &re); err != nil {
			return nil, fmt.Errorf("%w: refund: %v", ErrMalformed, err)
		}
		n, err = s.refundNotice(&re)
	default:
		return nil, fmt.Errorf("%w: event type %q is not one Keel subscribes to", ErrMalformed, ev.Type)
	}
	if err != nil {
		return nil, err
	}
	n.NotifyID = ev.ID
	return n, nil
}

func (s *stripeChannel) paymentNotice(pi *stripe.PaymentIntent) (*Notice, error) {
	n := &Notice{Channel: KindStripe, Event: EventPayment, MerchantID: s.cfg.MerchantID, AppID: s.cfg.AppID,
		OutTradeNo: pi.Metadata[StripeMetaTradeNo], TransactionID: pi.ID, AmountMinor: pi.Amount,
		Currency: strings.ToUpper(string(pi.Currency))}
	switch pi.Status {
	case stripe.PaymentIntentStatusSucceeded:
		n.State, n.AmountMinor = StatePaid, pi.AmountReceived
		n.At = time.Unix(pi.Created, 0).UTC()
		if pi.LatestCharge != nil && pi.LatestCharge.Created != 0 {
			n.At = time.Unix(pi.LatestCharge.Created, 0).UTC()
		}
	case stripe.PaymentIntentStatusCanceled:
		n.State = StateClosed
	default:
		n.State = StateNotPaid
	}
	if n.OutTradeNo == "" || n.TransactionID == "" || n.AmountMinor < 0 {
		return nil, fmt.Errorf("%w: payment intent %q without %s metadata or with a negative amount", ErrMalformed, pi.ID, StripeMetaTradeNo)
	}
	return n, nil
}

func (s *stripeChannel) refundNotice(re *stripe.Refund) (*Notice, error) {
	n := &Notice{Channel: KindStripe, Event: EventRefund, MerchantID: s.cfg.MerchantID, AppID: s.cfg.AppID,
		OutTradeNo: re.Metadata[StripeMetaTradeNo], OutRefundNo: re.Metadata[StripeMetaRefundNo], RefundID: re.ID,
		AmountMinor: re.Amount, Currency: strings.ToUpper(string(re.Currency)), At: time.Unix(re.Created, 0).UTC()}
	if re.PaymentIntent != nil {
		n.TransactionID = re.PaymentIntent.ID
	}
	switch re.Status {
	case stripe.RefundStatusSucceeded:
		n.State = StateRefunded
	case stripe.RefundStatusFailed, stripe.RefundStatusCanceled:
		n.State = StateRefundFail
	default:
		n.State = StateRefunding
	}
	if n.OutTradeNo == "" || n.OutRefundNo == "" || n.AmountMinor < 0 {
		return nil, fmt.Errorf("%w: refund %q without Keel's numbers in metadata or with a negative amount", ErrMalformed, re.ID)
	}
	return n, nil
}

// Ack answers 200; any 2xx stops Stripe's retries.
func (s *stripeChannel) Ack(w http.ResponseWriter) { w.WriteHeader(http.StatusOK) }

// Fail answers an error status, which Stripe retries with backoff.
func (s *stripeChannel) Fail(w http.ResponseWriter, status int, message string) {
	if status < 400 {
		status = http.StatusBadRequest
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": "FAIL", "message": message})
}

// stripeError classifies an error from the library.
func stripeError(op string, err error) error {
	var se *stripe.Error
	if !errors.As(err, &se) {
		return transportError(op, err)
	}
	detail := strings.TrimSpace(string(se.Code) + " " + se.Msg)
	switch {
	case se.HTTPStatusCode >= 500 || se.HTTPStatusCode == http.StatusTooManyRequests || se.HTTPStatusCode == 0:
		return fmt.Errorf("%s: %w: HTTP %d %s", op, ErrUnknownOutcome, se.HTTPStatusCode, detail)
	case se.Code == stripe.ErrorCodeResourceMissing || se.HTTPStatusCode == http.StatusNotFound:
		return fmt.Errorf("%s: %w: %s", op, ErrNotFound, detail)
	}
	return fmt.Errorf("%s: %w: HTTP %d %s", op, ErrRejected, se.HTTPStatusCode, detail)
}

// intent finds the PaymentIntent carrying our number. Stripe's search is
// eventually consistent (about a minute in live mode): ErrNotFound right
// after creation is not proof, which is why Keel keeps querying unknowns.
func (s *stripeChannel) intent(ctx context.Context, op, outTradeNo string) (*stripe.PaymentIntent, error) {
	if strings.ContainsAny(outTradeNo, `'\`) {
		return nil, fmt.Errorf("%s: %w: number %q cannot be searched", op, ErrRejected, outTradeNo)
	}
	p := &stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{
		Query: fmt.Sprintf("metadata['%s']:'%s'", StripeMetaTradeNo, outTradeNo), Context: ctx}}
	p.AddExpand("data.latest_charge")
	for pi, err := range s.sc.V1PaymentIntents.Search(ctx, p) {
		if err != nil {
			return nil, stripeError(op, err)
		}
		return pi, nil
	}
	return nil, fmt.Errorf("%s: %w: no payment intent with %s %s", op, ErrNotFound, StripeMetaTradeNo, outTradeNo)
}

func (s *stripeChannel) QueryPayment(ctx context.Context, outTradeNo string) (*Notice, error) {
	op := "stripe query " + outTradeNo
	pi, err := s.intent(ctx, op, outTradeNo)
	if err != nil {
		return nil, err
	}
	n, err := s.paymentNotice(pi)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return n, nil
}

func (s *stripeChannel) ClosePayment(ctx context.Context, outTradeNo string) error {
	op := "stripe close " + outTradeNo
	pi, err := s.intent(ctx, op, outTradeNo)
	if err != nil {
		return err
	}
	if _, err := s.sc.V1PaymentIntents.Cancel(ctx, pi.ID, &stripe.PaymentIntentCancelParams{}); err != nil {
		return stripeError(op, err)
	}
	return nil
}

// findRefund lists the intent's refunds for the one carrying our number.
func (s *stripeChannel) findRefund(ctx context.Context, op, piID, outRefundNo string) (*stripe.Refund, error) {
	lp := &stripe.RefundListParams{PaymentIntent: stripe.String(piID)}
	lp.Context = ctx
	lp.Limit = stripe.Int64(100)
	for re, err := range s.sc.V1Refunds.List(ctx, lp) {
		if err != nil {
			return nil, stripeError(op, err)
		}
		if re.Metadata[StripeMetaRefundNo] == outRefundNo {
			return re, nil
		}
	}
	return nil, nil
}

// Refund looks for a refund with our number first and creates one only if
// none exists, with the number as Idempotency-Key as well: Stripe forgets
// idempotency keys after 24 hours, so the key alone cannot keep a late
// retry from refunding twice.
func (s *stripeChannel) Refund(ctx context.Context, r RefundRequest) (*Notice, error) {
	op := "stripe refund " + r.OutRefundNo
	if r.AmountMinor <= 0 || (r.TotalMinor > 0 && r.AmountMinor > r.TotalMinor) {
		return nil, fmt.Errorf("%s: %w: amount %d of total %d", op, ErrRejected, r.AmountMinor, r.TotalMinor)
	}
	pi, err := s.intent(ctx, op, r.OutTradeNo)
	if err != nil {
		return nil, err
	}
	re, err := s.findRefund(ctx, op, pi.ID, r.OutRefundNo)
	if err != nil {
		return nil, err
	}
	if re == nil {
		p := &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID), Amount: stripe.Int64(r.AmountMinor)}
		p.Context = ctx
		p.AddMetadata(StripeMetaTradeNo, r.OutTradeNo)
		p.AddMetadata(StripeMetaRefundNo, r.OutRefundNo)
		if r.Reason != "" {
			p.AddMetadata("reason", r.Reason)
		}
		p.SetIdempotencyKey("keel-refund-" + r.OutRefundNo)
		if re, err = s.sc.V1Refunds.Create(ctx, p); err != nil {
			return nil, stripeError(op, err)
		}
	}
	n, err := s.refundNotice(re)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return n, nil
}

func (s *stripeChannel) QueryRefund(ctx context.Context, outTradeNo, outRefundNo string) (*Notice, error) {
	op := "stripe refund query " + outRefundNo
	pi, err := s.intent(ctx, op, outTradeNo)
	if err != nil {
		return nil, err
	}
	re, err := s.findRefund(ctx, op, pi.ID, outRefundNo)
	if err != nil {
		return nil, err
	}
	if re == nil {
		return nil, fmt.Errorf("%s: %w: no refund with %s %s", op, ErrNotFound, StripeMetaRefundNo, outRefundNo)
	}
	n, err := s.refundNotice(re)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return n, nil
}

// Bill lists the balance transactions of the UTC day containing day (the
// day Stripe's balance reports use), with their sources and the sources'
// payment intents expanded to find Keel's numbers.
func (s *stripeChannel) Bill(ctx context.Context, day time.Time) ([]BillLine, error) {
	d := day.UTC()
	from := time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC)
	date := from.Format("2006-01-02")
	op := "stripe bill " + date
	lp := &stripe.BalanceTransactionListParams{CreatedRange: &stripe.RangeQueryParams{
		GreaterThanOrEqual: from.Unix(), LesserThan: from.Add(24 * time.Hour).Unix()}}
	lp.Context = ctx
	lp.Limit = stripe.Int64(100)
	lp.AddExpand("data.source")
	lp.AddExpand("data.source.payment_intent")
	var out []BillLine
	for bt, err := range s.sc.V1BalanceTransactions.List(ctx, lp) {
		if err != nil {
			return nil, stripeError(op, err)
		}
		l := BillLine{Day: date, MerchantID: s.cfg.MerchantID, FeeMinor: bt.Fee, Currency: strings.ToUpper(string(bt.Currency)),
			At: time.Unix(bt.Created, 0).UTC()}
		switch {
		case bt.Source != nil && bt.Source.Charge != nil:
			c := bt.Source.Charge
			if c.PaymentIntent == nil {
				continue // a charge Keel did not make through a PaymentIntent
			}
			l.Event, l.State, l.AmountMinor = EventPayment, StatePaid, bt.Amount
			l.TransactionID, l.OutTradeNo = c.PaymentIntent.ID, c.PaymentIntent.Metadata[StripeMetaTradeNo]
		case bt.Source != nil && bt.Source.Refund != nil:
			re := bt.Source.Refund
			l.Event, l.State, l.AmountMinor = EventRefund, StateRefunded, -bt.Amount
			l.RefundID, l.OutRefundNo, l.OutTradeNo = re.ID, re.Metadata[StripeMetaRefundNo], re.Metadata[StripeMetaTradeNo]
			if re.PaymentIntent != nil {
				l.TransactionID = re.PaymentIntent.ID
			}
		default:
			continue // payouts, fees, adjustments: not trades
		}
		out = append(out, l)
	}
	return out, nil
}
