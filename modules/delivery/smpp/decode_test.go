package smpp_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/keelwork/keel/modules/delivery/smpp"
)

// Every malformed body fails with the sentinel and the command_status
// the server answers with.
func TestDecodeRejects(t *testing.T) {
	submit, mo := mustEncode(t, 1, sampleSubmit()), mustEncode(t, 1, sampleMO())
	bare := mustEncode(t, 1, &smpp.SubmitSM{}) // 17 bytes of body, sm_length last
	tlv := func(tag, n uint16, v ...byte) []byte {
		return withLength(append(bytes.Clone(bare), append([]byte{byte(tag >> 8), byte(tag), byte(n >> 8), byte(n)}, v...)...))
	}
	bind := func(body string) []byte { return frame(uint32(smpp.CmdBindTransceiver), 1, []byte(body)) }
	cases := []struct {
		name   string
		b      []byte
		err    error
		status uint32
	}{
		{"header only partly", []byte{0, 0, 0, 16, 0}, smpp.ErrLength, smpp.StatusInvCmdLen},
		{"short body", withLength(bytes.Clone(mo[:len(mo)-1])), smpp.ErrLength, smpp.StatusInvCmdLen},
		{"byte left over", withLength(append(mustEncode(t, 1, &smpp.Unbind{}), 0)), smpp.ErrLength, smpp.StatusInvCmdLen},
		{"length field", withStatus(bytes.Clone(submit), 0)[:len(submit)-1], smpp.ErrLength, smpp.StatusInvCmdLen},
		{"too large", frame(uint32(smpp.CmdSubmitSM), 1, make([]byte, smpp.MaxPDUSize)), smpp.ErrTooLarge, smpp.StatusInvCmdLen},
		{"unknown command", frame(0x00000055, 1, nil), smpp.ErrUnknownCommand, smpp.StatusInvCmdID},
		{"request with status", withStatus(mustEncode(t, 1, &smpp.EnquireLink{}), 5), smpp.ErrMalformed, smpp.StatusUnknownErr},
		{"system_id", bind(strings.Repeat("s", 16) + "\x00p\x00\x00\x34\x00\x00\x00"), smpp.ErrMalformed, smpp.StatusInvSysID},
		{"password", bind("s\x00" + strings.Repeat("p", 9) + "\x00\x00\x34\x00\x00\x00"), smpp.ErrMalformed, smpp.StatusInvPaswd},
		{"bind cut", bind("s\x00p\x00\x00"), smpp.ErrLength, smpp.StatusInvCmdLen},
		{"service_type", frame(uint32(smpp.CmdSubmitSM), 1, []byte("ABCDEF")), smpp.ErrMalformed, smpp.StatusInvSerTyp},
		{"schedule format", bytes.Replace(submit, []byte("260814153000004+"), []byte("26081415300000x+"), 1), smpp.ErrMalformed, smpp.StatusInvSched},
		{"sm_length 255", withLength(append(bare[:len(bare)-1:len(bare)-1], append([]byte{255}, make([]byte, 255)...)...)), smpp.ErrMalformed, smpp.StatusInvMsgLen},
		{"sm_length beyond", withLength(append(bare[:len(bare)-1:len(bare)-1], 5, 'a')), smpp.ErrLength, smpp.StatusInvCmdLen},
		{"tlv header cut", withLength(append(bytes.Clone(bare), 0x04, 0x27, 0)), smpp.ErrLength, smpp.StatusInvOptParStream},
		{"tlv value cut", tlv(0x0427, 2, 1), smpp.ErrLength, smpp.StatusInvOptParStream},
		{"tlv fixed length", tlv(0x0427, 2, 1, 2), smpp.ErrMalformed, smpp.StatusInvParLen},
		{"tlv cstring", tlv(0x001E, 2, 'a', 'b'), smpp.ErrMalformed, smpp.StatusInvParLen},
		{"tlv twice", withLength(append(tlv(0x1400, 0), 0x14, 0, 0, 0)), smpp.ErrMalformed, smpp.StatusInvOptParStream},
		{"payload with sm", withLength(append(bare[:len(bare)-1:len(bare)-1], 1, 'x', 0x04, 0x24, 0, 1, 'y')), smpp.ErrMalformed, smpp.StatusInvMsgLen},
		{"deliver validity", cmd(bytes.Replace(submit, []byte("260814153000004+\x00"), []byte("\x00"), 1), smpp.CmdDeliverSM), smpp.ErrMalformed, smpp.StatusInvExpiry},
		{"message_id", frame(uint32(smpp.CmdSubmitSMResp), 1, []byte(strings.Repeat("f", 65)+"\x00")), smpp.ErrMalformed, smpp.StatusInvMsgID},
	}
	for _, c := range cases {
		_, _, err := smpp.Decode(c.b)
		if !errors.Is(err, c.err) || smpp.StatusOf(err) != c.status {
			t.Errorf("%s: err %v (%s), want %v with %s", c.name, err, smpp.StatusName(smpp.StatusOf(err)), c.err, smpp.StatusName(c.status))
		}
	}
}

// cmd rewrites the command_id and fixes the length.
func cmd(b []byte, c smpp.CommandID) []byte {
	b[4], b[5], b[6], b[7] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
	return withLength(b)
}
