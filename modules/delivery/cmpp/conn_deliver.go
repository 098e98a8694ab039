package cmpp

import (
	"context"
	"fmt"
	"time"
)

// pending is one DELIVER awaiting its DELIVER_RESP.
type pending struct {
	seq   uint32
	msgID MsgID
	timer *time.Timer
}

// Deliver sends d (a status report or an MO message) and returns its
// Sequence_Id once the PDU is written. It first takes a window slot,
// waiting while Config.Window DELIVERs are unanswered; if ctx ends first
// the error wraps ErrWindowFull and ctx's error. If d.MsgID is zero a
// fresh Msg_Id is allocated and stored in d.MsgID. A report whose Layout
// is 0 uses the account's ReportLayout, else the connection's version.
//
// The slot frees when Handler.DeliverResp is called for seq, or when
// AckTimeout passes (reported to an AckTimeoutHandler).
func (c *Conn) Deliver(ctx context.Context, d *Deliver) (seq uint32, err error) {
	if err := c.acquire(ctx); err != nil {
		return 0, err
	}
	if d.MsgID == 0 {
		d.MsgID = c.srv.ids.Next()
	}
	seq = c.nextSeq()
	b, err := Encode(c.version, seq, c.withLayout(d))
	if err != nil {
		<-c.window
		return 0, err
	}
	p := c.track(seq, d.MsgID)
	if err := c.writeWait(b); err != nil {
		c.resolve(seq)
		return 0, fmt.Errorf("writing DELIVER seq %d: %w", seq, err)
	}
	c.arm(p)
	return seq, nil
}

// acquire takes a window slot.
func (c *Conn) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.terminating.Load() {
		return ErrConnClosed // no requests after our TERMINATE
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

// withLayout fills in the report layout without changing the caller's
// report.
func (c *Conn) withLayout(d *Deliver) *Deliver {
	if d.Report == nil || d.Report.Layout != 0 {
		return d
	}
	cp, r := *d, *d.Report
	r.Layout = c.reportLayout
	cp.Report = &r
	return &cp
}

func (c *Conn) track(seq uint32, id MsgID) *pending {
	p := &pending{seq: seq, msgID: id}
	c.mu.Lock()
	c.pending[seq] = p
	c.mu.Unlock()
	return p
}

// arm starts the ack timer once the DELIVER is on the wire, unless the
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
func (c *Conn) resolve(seq uint32) (*pending, bool) {
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
	return p, ok
}
