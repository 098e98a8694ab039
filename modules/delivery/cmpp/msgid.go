package cmpp

import (
	"fmt"
	"time"
)

// MsgID is the 64-bit Msg_Id. From the most significant bit: month (4),
// day (5), hour (5), minute (6), second (6), gateway id (22), sequence
// (16). It has no year, so it is unique for about a year per gateway id
// and is never a permanent key on its own.
type MsgID uint64

// MaxGatewayID is the largest gateway id the 22-bit field holds.
const MaxGatewayID = 1<<22 - 1

// MsgIDParts are the fields of a MsgID.
type MsgIDParts struct {
	Month, Day, Hour, Minute, Second int
	Gateway                          uint32
	Seq                              uint16
}

// MakeMsgID packs parts; values wider than their field are masked.
func MakeMsgID(p MsgIDParts) MsgID {
	v := uint64(p.Month) & 0xf
	v = v<<5 | uint64(p.Day)&0x1f
	v = v<<5 | uint64(p.Hour)&0x1f
	v = v<<6 | uint64(p.Minute)&0x3f
	v = v<<6 | uint64(p.Second)&0x3f
	v = v<<22 | uint64(p.Gateway)&MaxGatewayID
	v = v<<16 | uint64(p.Seq)
	return MsgID(v)
}

// Parts unpacks the fields of id.
func (id MsgID) Parts() MsgIDParts {
	v := uint64(id)
	return MsgIDParts{
		Seq:     uint16(v),
		Gateway: uint32(v>>16) & MaxGatewayID,
		Second:  int(v>>38) & 0x3f,
		Minute:  int(v>>44) & 0x3f,
		Hour:    int(v>>50) & 0x1f,
		Day:     int(v>>55) & 0x1f,
		Month:   int(v >> 60),
	}
}

// String is the decimal display form used by operators and carriers:
// MMDDHHMMSS, then the gateway id in 7 digits and the sequence in 5.
func (id MsgID) String() string {
	p := id.Parts()
	return fmt.Sprintf("%02d%02d%02d%02d%02d%07d%05d",
		p.Month, p.Day, p.Hour, p.Minute, p.Second, p.Gateway, p.Seq)
}

// Time is the month, day and time of id placed in year and loc, for
// display next to the date the id was issued on.
func (id MsgID) Time(year int, loc *time.Location) time.Time {
	p := id.Parts()
	return time.Date(year, time.Month(p.Month), p.Day, p.Hour, p.Minute, p.Second, 0, loc)
}
