package delivery

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// HTTP push contract (docs/delivery.md): POST application/json, the body a
// JSON array of items (at most http_batch), signed with the application's
// secret; the customer answers 2xx with a per-item ACK:
//
//	{"code": 0, "acks": [{"id": "123", "code": 0}, ...]}
//
// Code 0 acknowledges an item; any other code rejects it. A non-zero
// top-level code rejects every item; an item without an ACK is rejected as
// an invalid ACK. A non-2xx status fails every item (http_status), a
// timeout leaves them unconfirmed (http_timeout), an unreachable URL fails
// them (http_connect).
const (
	HeaderAccount   = "X-Keel-Account"
	HeaderTimestamp = "X-Keel-Timestamp"
	HeaderSignature = "X-Keel-Signature"
)

// Sign is the signature of an HTTP push: hex HMAC-SHA256 over the
// timestamp header, a newline and the body, keyed by the application's
// secret. Customers verify it and reject stale timestamps.
func Sign(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'\n'})
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
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

// PushAck is the customer's answer to an HTTP push.
type PushAck struct {
	Code *int64        `json:"code"`
	Acks []PushItemAck `json:"acks"`
}

// PushItemAck acknowledges (Code 0) or rejects one item.
type PushItemAck struct {
	ID   string `json:"id"`
	Code *int64 `json:"code"`
}

// itemVerdict is what an HTTP answer says of one item.
type itemVerdict struct {
	status Status
	class  string
	err    string
	result *int64
}

// parseAck maps a 2xx body to a verdict per pushed id. It never fails:
// an unreadable body rejects every item as an invalid ACK.
func parseAck(body []byte, ids []string) map[string]itemVerdict {
	out := make(map[string]itemVerdict, len(ids))
	var ack PushAck
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&ack); err != nil || ack.Code == nil {
		for _, id := range ids {
			out[id] = itemVerdict{status: StatusRejected, class: ClassInvalidAck, err: "response body is not an ACK object"}
		}
		return out
	}
	if *ack.Code != 0 {
		for _, id := range ids {
			out[id] = itemVerdict{status: StatusRejected, class: ClassAckRejected, result: ack.Code,
				err: fmt.Sprintf("batch rejected with code %d", *ack.Code)}
		}
		return out
	}
	got := make(map[string]*int64, len(ack.Acks))
	for _, a := range ack.Acks {
		if a.Code != nil {
			if _, dup := got[a.ID]; !dup {
				got[a.ID] = a.Code
			}
		}
	}
	for _, id := range ids {
		code, ok := got[id]
		switch {
		case !ok:
			out[id] = itemVerdict{status: StatusRejected, class: ClassInvalidAck, err: "no ACK for this item"}
		case *code == 0:
			out[id] = itemVerdict{status: StatusDelivered, result: code}
		default:
			out[id] = itemVerdict{status: StatusRejected, class: ClassAckRejected, result: code,
				err: fmt.Sprintf("item rejected with code %d", *code)}
		}
	}
	return out
}

// httpPusher batches the HTTP pushes of each application: items queue
// per application and one request carries up to batch of them.
type httpPusher struct {
	client   *http.Client
	batch    int
	conclude func(a *attempt, o outcome)
	log      *slog.Logger
	quit     chan struct{}

	mu     sync.Mutex
	queues map[int64]*httpQueue
	wg     sync.WaitGroup
}

type httpQueue struct {
	app    *Application
	items  []httpPending
	signal chan struct{}
}

type httpPending struct {
	a    *attempt
	item PushItem
}

// httpIdle is how long an application's sender goroutine lingers without
// work before it exits.
const httpIdle = 30 * time.Second

func newHTTPPusher(timeout time.Duration, batch int, conclude func(*attempt, outcome), log *slog.Logger) *httpPusher {
	return &httpPusher{
		client: &http.Client{Timeout: timeout}, batch: batch, conclude: conclude, log: log,
		quit: make(chan struct{}), queues: map[int64]*httpQueue{},
	}
}

// enqueue queues one claimed item; its outcome arrives through conclude.
func (p *httpPusher) enqueue(app *Application, a *attempt, item PushItem) {
	p.mu.Lock()
	q := p.queues[app.ID]
	if q == nil {
		q = &httpQueue{signal: make(chan struct{}, 1)}
		p.queues[app.ID] = q
		p.wg.Add(1)
		go p.run(app.ID, q)
	}
	q.app = app
	q.items = append(q.items, httpPending{a: a, item: item})
	p.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (p *httpPusher) stop() {
	close(p.quit)
	p.wg.Wait()
}

func (p *httpPusher) run(appID int64, q *httpQueue) {
	defer p.wg.Done()
	idle := time.NewTimer(httpIdle)
	defer idle.Stop()
	for {
		app, items := p.take(q)
		if len(items) > 0 {
			p.push(app, items)
			continue
		}
		select {
		case <-q.signal:
			idle.Reset(httpIdle)
		case <-idle.C:
			if p.retire(appID, q) {
				return
			}
			idle.Reset(httpIdle)
		case <-p.quit:
			p.abandon(q)
			return
		}
	}
}

func (p *httpPusher) take(q *httpQueue) (*Application, []httpPending) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := min(len(q.items), p.batch)
	items := append([]httpPending(nil), q.items[:n]...)
	q.items = q.items[n:]
	return q.app, items
}

// retire removes an idle queue; false when work arrived meanwhile.
func (p *httpPusher) retire(appID int64, q *httpQueue) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(q.items) > 0 {
		return false
	}
	delete(p.queues, appID)
	return true
}

// abandon leaves queued items to their deadlines at shutdown: nothing was
// sent, but their records are awaiting_ack, so they end unconfirmed
// unless an ACK deadline path finds them first.
func (p *httpPusher) abandon(q *httpQueue) {
	p.mu.Lock()
	items := q.items
	q.items = nil
	p.mu.Unlock()
	for _, it := range items {
		p.conclude(it.a, outcome{Status: StatusFailed, Class: ClassGateway, Error: "gateway stopping before the push"})
	}
}

func (p *httpPusher) push(app *Application, items []httpPending) {
	body := make([]PushItem, len(items))
	ids := make([]string, len(items))
	for i, it := range items {
		body[i], ids[i] = it.item, it.item.ID
	}
	raw, err := json.Marshal(body)
	if err != nil {
		p.concludeAll(items, outcome{Status: StatusFailed, Class: ClassEncode, Error: err.Error()})
		return
	}
	status, resp, err := p.post(app, raw)
	switch {
	case err != nil:
		p.concludeAll(items, transportOutcome(err))
	case status < 200 || status > 299:
		p.concludeAll(items, outcome{Status: StatusFailed, Class: ClassHTTPStatus,
			Error: fmt.Sprintf("HTTP %d: %s", status, truncate(string(resp), 200))})
	default:
		verdicts := parseAck(resp, ids)
		for _, it := range items {
			v := verdicts[it.item.ID]
			p.conclude(it.a, outcome{Status: v.status, Class: v.class, Error: v.err, Result: v.result,
				Acked: v.status == StatusDelivered || v.result != nil})
		}
	}
}

func (p *httpPusher) concludeAll(items []httpPending, o outcome) {
	for _, it := range items {
		p.conclude(it.a, o)
	}
}

func (p *httpPusher) post(app *Application, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, app.PushURL, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderAccount, app.Account)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign(app.Secret, ts, body))
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, b, nil
}

// transportOutcome classifies a request that got no HTTP answer: never
// connected (failed, nothing reached the customer) or timed out / broke
// after sending (unconfirmed: it may have been processed).
func transportOutcome(err error) outcome {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return outcome{Status: StatusFailed, Class: ClassHTTPConnect, Error: err.Error()}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return outcome{Status: StatusUnconfirmed, Class: ClassHTTPTimeout, Error: err.Error()}
	}
	return outcome{Status: StatusUnconfirmed, Class: ClassGateway, Error: err.Error()}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
