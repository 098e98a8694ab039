package cmpp

import "context"

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
	return c.s.Request(ctx, "DELIVER", func() (uint32, MsgID, []byte, error) {
		if d.MsgID == 0 {
			d.MsgID = c.srv.ids.Next()
		}
		seq := c.nextSeq()
		b, err := Encode(c.version, seq, c.withLayout(d))
		return seq, d.MsgID, b, err
	})
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
