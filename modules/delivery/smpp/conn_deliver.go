package smpp

import (
	"context"
	"fmt"
	"time"
)

// pending is one deliver_sm awaiting its response.
type pending struct {
	seq   uint32
	timer *time.Timer
}

// Deliver sends d (a delivery receipt or an MO message) and returns its
// sequence_number once the PDU is written. It first takes a window slot,
// waiting while Config.Window deliver_sm are unanswered; if ctx ends
// first the error wraps ErrWindowFull and ctx's error. A transmitter
// bind gets ErrNotReceiver. For an ESME bound below interface version
// 3.4 the TLVs are left out, as the specification requires.
//
// The slot frees when Handler.DeliverResp is called for seq, or when
// AckTimeout passes (reported to an AckTimeoutHandler).
func (c *Conn) Deliver(ctx context.Context, d *DeliverSM) (seq uint32, err error) {
	if !c.bindType.Receives() {
		return 0, fmt.Errorf("%w (bound as %s)", ErrNotReceiver, c.bindType)
	}
	if err := c.acquire(ctx); err != nil {
		return 0, err
	}
	seq = c.nextSeq()
	b, err := Encode(seq, c.forVersion(d))
	if err != nil {
		<-c.window
		return 0, err
	}
	p := c.track(seq)
	if err := c.writeWait(b); err != nil {
		c.resolve(seq)
		return 0, fmt.Errorf("writing deliver_sm seq %d: %w", seq, err)
	}
	c.arm(p)
	return seq, nil
}

// acquire takes a window slot.
func (c *Conn) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.unbinding.Load() {
		return ErrConnClosed // no requests after our unbind
	}
	select {
	case <-c.done:
		return ErrConnClosed
	default:
	}
	select {
	case c.window <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrWindowFull, ctx.Err())
	case <-c.done:
		return ErrConnClosed
	}
}

// forVersion drops the TLVs for a pre-3.4 ESME without changing the
// caller's PDU.
func (c *Conn) forVersion(d *DeliverSM) *DeliverSM {
	if c.ifVersion >= InterfaceVersion34 || len(d.TLVs) == 0 {
		return d
	}
	cp := *d
	cp.TLVs = nil
	return &cp
}

func (c *Conn) track(seq uint32) *pending {
	p := &pending{seq: seq}
	c.mu.Lock()
	c.pending[seq] = p
	c.mu.Unlock()
	return p
}

// arm starts the ack timer once the deliver_sm is on the wire, unless the
// response already came.
func (c *Conn) arm(p *pending) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[p.seq] != p {
		return
	}
	p.timer = time.AfterFunc(c.srv.cfg.AckTimeout, func() {
		select {
		case c.expired <- p:
		case <-c.ctx.Done():
		}
	})
}

// resolve removes seq from the outstanding set and frees its slot.
func (c *Conn) resolve(seq uint32) bool {
	c.mu.Lock()
	p, ok := c.pending[seq]
	if ok {
		delete(c.pending, seq)
		if p.timer != nil {
			p.timer.Stop()
		}
	}
	c.mu.Unlock()
	if ok {
		<-c.window
	}
	return ok
}
