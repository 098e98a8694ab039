package smpp

import (
	"context"
	"fmt"
)

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
	return c.s.Request(ctx, "deliver_sm", func() (uint32, struct{}, []byte, error) {
		seq := c.nextSeq()
		b, err := Encode(seq, c.forVersion(d))
		return seq, struct{}{}, b, err
	})
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
