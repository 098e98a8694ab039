package cmpp

import (
	"fmt"
	"time"
)

// Status report sizes: Msg_Id 8, Stat 7, Submit_time 10, Done_time 10,
// Dest_terminal_Id 21 or 32, SMSC_sequence 4.
const (
	ReportLen20 = 60
	ReportLen30 = 71
)

// Report stat values named by the specs. Failures may also carry an
// "XX:nnnn" code (e.g. "MA:0001"); Stat is always 7 characters on the wire.
const (
	StatDelivered = "DELIVRD"
	StatExpired   = "EXPIRED"
	StatDeleted   = "DELETED"
	StatUndeliv   = "UNDELIV"
	StatAccepted  = "ACCEPTD"
	StatUnknown   = "UNKNOWN"
	StatRejected  = "REJECTD"
)

// ReportTimeLayout formats Submit_time and Done_time (YYMMDDHHMM).
const ReportTimeLayout = "0601021504"

// ReportTime formats t for Submit_time / Done_time in t's location.
func ReportTime(t time.Time) string { return t.Format(ReportTimeLayout) }

// Report is the status report carried in Msg_Content of a DELIVER with
// Registered_Delivery = 1. MsgID is the Msg_Id that SUBMIT_RESP returned
// for the original message.
type Report struct {
	MsgID          MsgID
	Stat           string // 7
	SubmitTime     string // 10, YYMMDDHHMM
	DoneTime       string // 10, YYMMDDHHMM
	DestTerminalID string // 21 in the 2.0 layout, 32 in the 3.0 layout
	SMSCSequence   uint32
	// Layout picks the 60-byte (V20) or 71-byte (V30) form; 0 follows the
	// connection's version. Decoding sets it from the content length.
	Layout Version
}

// layoutFor resolves the report layout for a connection of version v.
func (r *Report) layoutFor(v Version) Version {
	if r.Layout != 0 {
		return r.Layout.Family()
	}
	return v.Family()
}

// encodeReport appends the report in the given layout family.
func encodeReport(e *encoder, r *Report, layout Version) {
	if layout == 0 {
		e.fail(fmt.Errorf("%w: report layout %#x", ErrUnsupportedVersion, uint8(r.Layout)))
		return
	}
	e.u64(uint64(r.MsgID))
	e.str("Stat", r.Stat, 7)
	e.str("Submit_time", r.SubmitTime, 10)
	e.str("Done_time", r.DoneTime, 10)
	e.str("Dest_terminal_Id", r.DestTerminalID, layout.terminalWidth())
	e.u32(r.SMSCSequence)
}

// DecodeReport parses a status report; its length (60 or 71 bytes)
// chooses the layout, because a 3.0 connection may carry the 60-byte form
// when the compatibility switch is on.
func DecodeReport(content []byte) (*Report, error) {
	r := &Report{}
	switch len(content) {
	case ReportLen20:
		r.Layout = V20
	case ReportLen30:
		r.Layout = V30
	default:
		return nil, fmt.Errorf("%w: status report is %d bytes, want %d or %d", ErrLength, len(content), ReportLen20, ReportLen30)
	}
	d := &decoder{b: content}
	r.MsgID = MsgID(d.u64())
	r.Stat = d.str(7)
	r.SubmitTime = d.str(10)
	r.DoneTime = d.str(10)
	r.DestTerminalID = d.str(r.Layout.terminalWidth())
	r.SMSCSequence = d.u32()
	if err := d.finish(); err != nil {
		return nil, fmt.Errorf("decoding status report: %w", err)
	}
	return r, nil
}
