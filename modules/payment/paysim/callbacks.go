package paysim

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/channel/alipay"
	"github.com/keelwork/keel/modules/payment/channel/wechatpay"
)

// callback is one notification the channel keeps sending until acked. Each
// attempt is built afresh (a new timestamp, nonce and signature, as the
// channels do), about the same notification id.
type callback struct {
	kind        channel.Kind
	outTradeNo  string
	outRefundNo string // set for refund notifications
	notifyID    string
	url         string
}

func (s *Sim) notifyPayment(kind channel.Kind, outTradeNo string) {
	s.start(&callback{kind: kind, outTradeNo: outTradeNo, notifyID: randomString(32), url: s.notifyURL(kind)})
}

func (s *Sim) notifyRefund(kind channel.Kind, outRefundNo string) {
	s.mu.Lock()
	r, ok := s.refunds[key{kind, outRefundNo}]
	s.mu.Unlock()
	if ok {
		s.start(&callback{kind: kind, outTradeNo: r.outTradeNo, outRefundNo: outRefundNo,
			notifyID: randomString(32), url: s.notifyURL(kind)})
	}
}

func (s *Sim) notifyURL(kind channel.Kind) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notify[kind]
}

// SetNotifyURL changes where a channel sends callbacks from now on (for a
// receiver that can only start once it has the channel's Config).
func (s *Sim) SetNotifyURL(kind channel.Kind, url string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notify[kind] = url
}

func (s *Sim) schedule(kind channel.Kind) []time.Duration {
	switch kind {
	case channel.KindWeChat:
		return wechatpay.RetrySchedule
	case channel.KindStripe:
		return StripeRetrySchedule
	}
	return alipay.RetrySchedule
}

func (s *Sim) scaled(d time.Duration) time.Duration {
	d = time.Duration(float64(d) / s.opts.TimeScale)
	return max(d, time.Millisecond)
}

// start takes the one-shot knobs (duplicate, reorder) for this callback and
// begins its delivery.
func (s *Sim) start(cb *callback) {
	if cb.url == "" {
		return
	}
	s.mu.Lock()
	dup := s.dupNext
	s.dupNext = 0
	var wait chan struct{}
	var release []chan struct{}
	if s.reorderNext {
		s.reorderNext = false
		wait = make(chan struct{})
		s.held = append(s.held, wait)
	} else {
		release, s.held = s.held, nil
	}
	s.mu.Unlock()
	s.wg.Add(1)
	go s.deliver(cb, dup, wait, release)
}

// heldFloor is the least time a reordered callback waits for the next one.
const heldFloor = 10 * time.Second

func (s *Sim) deliver(cb *callback, dup int, wait chan struct{}, release []chan struct{}) {
	defer s.wg.Done()
	sched := s.schedule(cb.kind)
	if wait != nil {
		// Released when the next callback has been sent; if none follows,
		// it goes at its first retry, but never sooner than heldFloor, so a
		// compressed schedule on a busy machine still reorders.
		t := time.NewTimer(max(s.scaled(sched[0]), heldFloor))
		select {
		case <-wait:
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
	for attempt := 0; ; attempt++ {
		copies := 1
		if attempt == 0 && dup > 1 {
			copies = dup
		}
		acked := s.attempt(cb, copies)
		if attempt == 0 {
			for _, ch := range release {
				close(ch)
			}
			release = nil
		}
		if acked {
			return
		}
		if attempt >= len(sched) {
			s.mu.Lock()
			s.c.gave++
			s.mu.Unlock()
			return
		}
		t := time.NewTimer(s.scaled(sched[attempt]))
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return
		}
	}
}

// attempt sends copies of the callback at once and reports whether any was
// acknowledged with the channel's success reply.
func (s *Sim) attempt(cb *callback, copies int) bool {
	s.mu.Lock()
	if s.loseNext > 0 {
		s.loseNext--
		if cb.outRefundNo == "" {
			s.c.lost[cb.outTradeNo]++
		}
		s.mu.Unlock()
		return false
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := false
	for range copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.sendOne(cb) {
				mu.Lock()
				acked = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return acked
}

func (s *Sim) sendOne(cb *callback) bool {
	h, body, err := s.build(cb)
	if err != nil {
		return false
	}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, cb.url, bytes.NewReader(body))
	if err != nil {
		return false
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return false // Keel did not answer: a failed attempt
	}
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	ok := false
	switch cb.kind {
	case channel.KindWeChat:
		ok = resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNoContent
	case channel.KindAlipay:
		ok = resp.StatusCode == http.StatusOK && strings.TrimSpace(string(reply)) == alipay.ReplySuccess
	case channel.KindStripe:
		ok = resp.StatusCode >= 200 && resp.StatusCode < 300
	}
	s.mu.Lock()
	if cb.outRefundNo != "" {
		s.c.refundSent[cb.outRefundNo]++
		if ok {
			s.c.refundAcked[cb.outRefundNo]++
		}
	} else {
		s.c.sent[cb.outTradeNo]++
		if ok {
			s.c.acked[cb.outTradeNo]++
		}
	}
	s.mu.Unlock()
	return ok
}

func (s *Sim) build(cb *callback) (http.Header, []byte, error) {
	switch cb.kind {
	case channel.KindWeChat:
		return s.wx.callback(cb)
	case channel.KindStripe:
		return s.st.callback(cb)
	}
	return s.ap.callback(cb)
}

// Notification returns the payment callback the channel would send for the
// trade now (headers and body), for tests that deliver or tamper with it.
func (s *Sim) Notification(kind channel.Kind, outTradeNo string) (http.Header, []byte, error) {
	return s.build(&callback{kind: kind, outTradeNo: outTradeNo, notifyID: randomString(32)})
}

// RefundNotification returns the refund callback the channel would send.
func (s *Sim) RefundNotification(kind channel.Kind, outRefundNo string) (http.Header, []byte, error) {
	s.mu.Lock()
	r, ok := s.refunds[key{kind, outRefundNo}]
	s.mu.Unlock()
	if !ok {
		return nil, nil, errUnknownKind
	}
	return s.build(&callback{kind: kind, outTradeNo: r.outTradeNo, outRefundNo: outRefundNo, notifyID: randomString(32)})
}
