// Package httppush is the delivery module's HTTP push adapter: it posts
// items to a customer's URL in signed JSON batches, one sender per
// customer, and reads the customer's per-item answer into a verdict. What
// an item is and what its verdict does to a record are the module's: here
// an item is an id and a JSON value, and a verdict is one of four
// statuses with a failure class.
package httppush

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
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The contract (docs/delivery.md): POST application/json, the body a
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

// Ack is the customer's answer to an HTTP push.
type Ack struct {
	Code *int64    `json:"code"`
	Acks []ItemAck `json:"acks"`
}

// ItemAck acknowledges (Code 0) or rejects one item.
type ItemAck struct {
	ID   string `json:"id"`
	Code *int64 `json:"code"`
}

// Status is what became of one pushed item.
type Status int

const (
	// Delivered: the customer acknowledged the item (code 0).
	Delivered Status = iota + 1
	// Rejected: the customer answered, and not with code 0 for the item.
	Rejected
	// Failed: nothing reached the customer.
	Failed
	// Unconfirmed: the request may have reached the customer, but no
	// answer came back; the item may have been processed.
	Unconfirmed
)

// Class says why an item was not delivered.
type Class string

const (
	ClassInvalidAck Class = "invalid_ack"  // a 2xx body without a valid ACK of the item
	ClassRejected   Class = "ack_rejected" // the ACK's code (the item's or the batch's) is not 0
	ClassStatus     Class = "http_status"  // the customer answered non-2xx
	ClassConnect    Class = "http_connect" // the customer's URL could not be reached
	ClassTimeout    Class = "http_timeout" // no answer before the timeout
	ClassEncode     Class = "encode"       // the batch could not be encoded
	ClassOther      Class = "other"        // any other transport failure, or the pusher stopping
)

// Verdict is what became of one item, and why.
type Verdict struct {
	Status Status
	Class  Class  // "" when Delivered
	Err    string // the detail behind Class
	Result *int64 // the customer's code for the item, when it gave one
}

// ParseAck maps a 2xx body to a verdict per pushed id. It never fails:
// an unreadable body rejects every item as an invalid ACK.
func ParseAck(body []byte, ids []string) map[string]Verdict {
	out := make(map[string]Verdict, len(ids))
	var ack Ack
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&ack); err != nil || ack.Code == nil {
		for _, id := range ids {
			out[id] = Verdict{Status: Rejected, Class: ClassInvalidAck, Err: "response body is not an ACK object"}
		}
		return out
	}
	if *ack.Code != 0 {
		for _, id := range ids {
			out[id] = Verdict{Status: Rejected, Class: ClassRejected, Result: ack.Code,
				Err: fmt.Sprintf("batch rejected with code %d", *ack.Code)}
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
			out[id] = Verdict{Status: Rejected, Class: ClassInvalidAck, Err: "no ACK for this item"}
		case *code == 0:
			out[id] = Verdict{Status: Delivered, Result: code}
		default:
			out[id] = Verdict{Status: Rejected, Class: ClassRejected, Result: code,
				Err: fmt.Sprintf("item rejected with code %d", *code)}
		}
	}
	return out
}

// Target is the customer an item goes to.
type Target struct {
	ID      int64 // one sender (and one batch) per ID
	URL     string
	Account string // sent in HeaderAccount
	Secret  string // signs the body
}

// Pusher batches the pushes of each target: items queue per target and
// one request carries up to batch of them. H is the caller's handle of an
// item, given back with its verdict.
type Pusher[H any] struct {
	client   *http.Client
	batch    int
	conclude func(h H, v Verdict)
	quit     chan struct{}

	mu     sync.Mutex
	queues map[int64]*queue[H]
	wg     sync.WaitGroup
}

type queue[H any] struct {
	target Target
	items  []pending[H]
	signal chan struct{}
}

type pending[H any] struct {
	h    H
	id   string
	body any
}

// idle is how long a target's sender goroutine lingers without work
// before it exits.
const idle = 30 * time.Second

// New returns a pusher whose requests time out after timeout, carrying
// at most batch items; conclude receives every item's verdict, from the
// sender goroutines.
func New[H any](timeout time.Duration, batch int, conclude func(H, Verdict)) *Pusher[H] {
	return &Pusher[H]{
		client: &http.Client{Timeout: timeout}, batch: batch, conclude: conclude,
		quit: make(chan struct{}), queues: map[int64]*queue[H]{},
	}
}

// Enqueue queues one item (id, and body, its JSON value); its verdict
// arrives through conclude.
func (p *Pusher[H]) Enqueue(t Target, h H, id string, body any) {
	p.mu.Lock()
	q := p.queues[t.ID]
	if q == nil {
		q = &queue[H]{signal: make(chan struct{}, 1)}
		p.queues[t.ID] = q
		p.wg.Add(1)
		go p.run(t.ID, q)
	}
	q.target = t
	q.items = append(q.items, pending[H]{h: h, id: id, body: body})
	p.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// Stop ends the senders; items still queued are concluded as failed
// (nothing was sent).
func (p *Pusher[H]) Stop() {
	close(p.quit)
	p.wg.Wait()
}

func (p *Pusher[H]) run(id int64, q *queue[H]) {
	defer p.wg.Done()
	timer := time.NewTimer(idle)
	defer timer.Stop()
	for {
		t, items := p.take(q)
		if len(items) > 0 {
			p.push(t, items)
			continue
		}
		select {
		case <-q.signal:
			timer.Reset(idle)
		case <-timer.C:
			if p.retire(id, q) {
				return
			}
			timer.Reset(idle)
		case <-p.quit:
			p.abandon(q)
			return
		}
	}
}

func (p *Pusher[H]) take(q *queue[H]) (Target, []pending[H]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := min(len(q.items), p.batch)
	items := append([]pending[H](nil), q.items[:n]...)
	q.items = q.items[n:]
	return q.target, items
}

// retire removes an idle queue; false when work arrived meanwhile.
func (p *Pusher[H]) retire(id int64, q *queue[H]) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(q.items) > 0 {
		return false
	}
	delete(p.queues, id)
	return true
}

// abandon concludes the items still queued at shutdown: nothing was
// sent, so they failed.
func (p *Pusher[H]) abandon(q *queue[H]) {
	p.mu.Lock()
	items := q.items
	q.items = nil
	p.mu.Unlock()
	for _, it := range items {
		p.conclude(it.h, Verdict{Status: Failed, Class: ClassOther, Err: "gateway stopping before the push"})
	}
}

func (p *Pusher[H]) push(t Target, items []pending[H]) {
	body := make([]any, len(items))
	ids := make([]string, len(items))
	for i, it := range items {
		body[i], ids[i] = it.body, it.id
	}
	raw, err := json.Marshal(body)
	if err != nil {
		p.concludeAll(items, Verdict{Status: Failed, Class: ClassEncode, Err: err.Error()})
		return
	}
	status, resp, err := p.post(t, raw)
	switch {
	case err != nil:
		p.concludeAll(items, transportVerdict(err))
	case status < 200 || status > 299:
		p.concludeAll(items, Verdict{Status: Failed, Class: ClassStatus,
			Err: fmt.Sprintf("HTTP %d: %s", status, truncate(string(resp), 200))})
	default:
		verdicts := ParseAck(resp, ids)
		for _, it := range items {
			p.conclude(it.h, verdicts[it.id])
		}
	}
}

func (p *Pusher[H]) concludeAll(items []pending[H], v Verdict) {
	for _, it := range items {
		p.conclude(it.h, v)
	}
}

func (p *Pusher[H]) post(t Target, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderAccount, t.Account)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign(t.Secret, ts, body))
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

// transportVerdict classifies a request that got no HTTP answer: never
// connected (failed, nothing reached the customer) or timed out / broke
// after sending (unconfirmed: it may have been processed).
func transportVerdict(err error) Verdict {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return Verdict{Status: Failed, Class: ClassConnect, Err: err.Error()}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return Verdict{Status: Unconfirmed, Class: ClassTimeout, Err: err.Error()}
	}
	return Verdict{Status: Unconfirmed, Class: ClassOther, Err: err.Error()}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
