package cmpp

import (
	"crypto/md5"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"time"
)

// AuthenticatorSource is the client's CONNECT proof:
// MD5(Source_Addr as its 6 wire bytes + 9 zero bytes + secret +
// timestamp as 10 digits MMDDHHMMSS). The server rebuilds it from the
// timestamp in the packet, not from its own clock.
func AuthenticatorSource(sourceAddr, secret string, timestamp uint32) ([16]byte, error) {
	if len(sourceAddr) > 6 {
		return [16]byte{}, fmt.Errorf("%w: Source_Addr %q is longer than 6 bytes", ErrMalformed, sourceAddr)
	}
	var addr [6]byte
	copy(addr[:], sourceAddr)
	b := make([]byte, 0, 6+9+len(secret)+10)
	b = append(b, addr[:]...)
	b = append(b, make([]byte, 9)...)
	b = append(b, secret...)
	b = fmt.Appendf(b, "%010d", timestamp)
	return md5.Sum(b), nil
}

// AuthenticatorISMG is the server's CONNECT_RESP proof:
// MD5(Status + AuthenticatorSource + secret), with Status as 1 byte for
// 2.0 and 4 big-endian bytes for 3.0.
func AuthenticatorISMG(v Version, status uint32, source [16]byte, secret string) [16]byte {
	b := make([]byte, 0, 4+16+len(secret))
	if v.Family() == V30 {
		b = binary.BigEndian.AppendUint32(b, status)
	} else {
		b = append(b, uint8(status))
	}
	b = append(b, source[:]...)
	b = append(b, secret...)
	return md5.Sum(b)
}

// VerifyConnect reports whether c proves knowledge of secret. The
// comparison takes constant time.
func VerifyConnect(c *Connect, secret string) bool {
	want, err := AuthenticatorSource(c.SourceAddr, secret, c.Timestamp)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(want[:], c.AuthenticatorSource[:]) == 1
}

// Timestamp is the CONNECT Timestamp for t: MMDDHHMMSS as a number.
func Timestamp(t time.Time) uint32 {
	_, mon, day := t.Date()
	h, m, s := t.Clock()
	return uint32(int(mon)*100000000 + day*1000000 + h*10000 + m*100 + s)
}
