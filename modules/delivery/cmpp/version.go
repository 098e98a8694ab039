package cmpp

import "fmt"

// Version is a CMPP protocol version byte: the high nibble is the major
// version, the low nibble the minor one.
type Version uint8

// The versions this package speaks. 0x21 is accepted from clients and uses
// the 2.0 layouts.
const (
	V20 Version = 0x20
	V21 Version = 0x21
	V30 Version = 0x30
)

// Family maps a version byte to the layout family it uses: V20 for 2.x
// (0x20, 0x21), V30 for 3.0, and 0 for anything this package cannot speak.
func (v Version) Family() Version {
	switch v {
	case V20, V21:
		return V20
	case V30:
		return V30
	}
	return 0
}

// Supported reports whether a client announcing v can be served.
func (v Version) Supported() bool { return v.Family() != 0 }

func (v Version) String() string {
	return fmt.Sprintf("%d.%d", v>>4, v&0x0f)
}

// terminalWidth is the width of the terminal-number fields
// (Fee_terminal_Id, Dest_terminal_Id, Src_terminal_Id): 21 bytes in 2.0,
// 32 in 3.0.
func (v Version) terminalWidth() int {
	if v.Family() == V30 {
		return 32
	}
	return 21
}

// resultWidth is the width of the Status/Result fields of CONNECT_RESP,
// SUBMIT_RESP and DELIVER_RESP: 1 byte in 2.0, 4 in 3.0.
func (v Version) resultWidth() int {
	if v.Family() == V30 {
		return 4
	}
	return 1
}
