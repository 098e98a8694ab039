package delivery

import (
	"time"

	"github.com/keelwork/keel/modules/delivery/httppush"
)

// The HTTP push channel: the wire contract and the sender are package
// httppush's; here is what an item carries and what a verdict does to an
// attempt.

// The headers of an HTTP push and its signature (httppush.Sign).
const (
	HeaderAccount   = httppush.HeaderAccount
	HeaderTimestamp = httppush.HeaderTimestamp
	HeaderSignature = httppush.HeaderSignature
)

// Sign is the signature of an HTTP push (see httppush.Sign): customers
// verify it and reject stale timestamps.
func Sign(secret, timestamp string, body []byte) string {
	return httppush.Sign(secret, timestamp, body)
}

// PushItem is one item of an HTTP push.
type PushItem struct {
	ID        string         `json:"id"` // the delivery record id
	Type      Kind           `json:"type"`
	MsgID     string         `json:"msg_id"`
	Phone     string         `json:"phone"`
	Report    *ReportPayload `json:"report,omitempty"`
	MO        *MOPayload     `json:"mo,omitempty"`
	Attempt   int            `json:"attempt"`
	CreatedAt time.Time      `json:"created_at"`
}

// PushAck is the customer's answer to an HTTP push; PushItemAck
// acknowledges (Code 0) or rejects one item.
type (
	PushAck     = httppush.Ack
	PushItemAck = httppush.ItemAck
)

// httpPusher sends the HTTP pushes of every application, an attempt per
// item.
type httpPusher = httppush.Pusher[*attempt]

func newHTTPPusher(timeout time.Duration, batch int, conclude func(*attempt, outcome)) *httpPusher {
	return httppush.New(timeout, batch, func(a *attempt, v httppush.Verdict) { conclude(a, httpOutcome(v)) })
}

// enqueueHTTP queues one claimed item for app; its outcome arrives through
// the pusher's conclude.
func (m *Module[TTx]) enqueueHTTP(app *Application, a *attempt, item PushItem) {
	m.http.Enqueue(httppush.Target{ID: app.ID, URL: app.PushURL, Account: app.Account, Secret: app.Secret}, a, item.ID, item)
}

// httpOutcome is the attempt's outcome of an HTTP verdict. An item the
// customer answered for, delivered or with a code, counts as acknowledged.
func httpOutcome(v httppush.Verdict) outcome {
	o := outcome{Class: httpClass(v.Class), Error: v.Err, Result: v.Result,
		Acked: v.Status == httppush.Delivered || v.Result != nil}
	switch v.Status {
	case httppush.Delivered:
		o.Status = StatusDelivered
	case httppush.Rejected:
		o.Status = StatusRejected
	case httppush.Unconfirmed:
		o.Status = StatusUnconfirmed
	default:
		o.Status = StatusFailed
	}
	return o
}

// httpClass is the record's failure class of an HTTP one.
func httpClass(c httppush.Class) string {
	switch c {
	case "":
		return ""
	case httppush.ClassInvalidAck:
		return ClassInvalidAck
	case httppush.ClassRejected:
		return ClassAckRejected
	case httppush.ClassStatus:
		return ClassHTTPStatus
	case httppush.ClassConnect:
		return ClassHTTPConnect
	case httppush.ClassTimeout:
		return ClassHTTPTimeout
	case httppush.ClassEncode:
		return ClassEncode
	default:
		return ClassGateway
	}
}
