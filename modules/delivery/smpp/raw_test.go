package smpp_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/keelwork/keel/modules/delivery/smpp"
)

// rawESME speaks our own codec over a plain socket, for PDUs a
// well-behaved client never sends and for checking exact bytes.
type rawESME struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, srv *smpp.Server) *rawESME {
	t.Helper()
	nc, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawESME{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (r *rawESME) send(seq uint32, p smpp.PDU) {
	r.t.Helper()
	b, err := smpp.Encode(seq, p)
	if err != nil {
		r.t.Fatal(err)
	}
	r.write(b)
}

func (r *rawESME) write(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// recvFrame reads the next frame within waitLimit.
func (r *rawESME) recvFrame() ([]byte, error) {
	r.nc.SetReadDeadline(time.Now().Add(waitLimit))
	return smpp.ReadFrame(r.br, smpp.MaxPDUSize)
}

func (r *rawESME) recv() (smpp.Header, smpp.PDU) {
	r.t.Helper()
	b, err := r.recvFrame()
	if err != nil {
		r.t.Fatalf("reading a pdu: %v", err)
	}
	h, p, err := smpp.Decode(b)
	if err != nil {
		r.t.Fatalf("decoding %x: %v", b, err)
	}
	return h, p
}

// expect reads the next PDU and checks its command, status and sequence.
func (r *rawESME) expect(cmd smpp.CommandID, status, seq uint32) smpp.PDU {
	r.t.Helper()
	h, p := r.recv()
	if h.Command != cmd || h.Status != status || h.Seq != seq {
		r.t.Fatalf("got %s %s seq %d, want %s %s seq %d", h.Command, smpp.StatusName(h.Status), h.Seq,
			cmd, smpp.StatusName(status), seq)
	}
	return p
}

// bind binds as esme1 with interface version 3.4.
func (r *rawESME) bind(t smpp.BindType) *smpp.BindResp {
	r.t.Helper()
	r.send(1, &smpp.Bind{Type: t, SystemID: "esme1", Password: "secret1", InterfaceVersion: 0x34})
	_, p := r.recv()
	return p.(*smpp.BindResp)
}

func (r *rawESME) expectEOF() {
	r.t.Helper()
	if b, err := r.recvFrame(); err == nil {
		r.t.Fatalf("connection still open, got %x", b)
	}
}
