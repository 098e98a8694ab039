package smpp_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/linxGnu/gosmpp"
	"github.com/linxGnu/gosmpp/data"
	"github.com/linxGnu/gosmpp/pdu"

	"github.com/keelwork/keel/modules/delivery/smpp"
)

// esme is a customer using the real gosmpp client. gosmpp answers
// deliver_sm and enquire_link by itself unless OnAllPDU is set; with it
// set, every PDU comes to the test through pdus unanswered, so each test
// decides whether and when to acknowledge. Only unbind is answered here
// (unless silent), so the server's Close can complete.
type esme struct {
	t      *testing.T
	sess   *gosmpp.Session
	pdus   chan pdu.PDU
	closed chan struct{} // gosmpp closed the session
	once   atomic.Bool
	silent atomic.Bool // leave the server's unbind unanswered
}

func dialESME(t *testing.T, srv *smpp.Server, typ pdu.BindingType, user, pass string, tune func(*gosmpp.Settings)) (*esme, error) {
	t.Helper()
	e := &esme{t: t, pdus: make(chan pdu.PDU, 256), closed: make(chan struct{})}
	auth := gosmpp.Auth{SMSC: srv.Addr().String(), SystemID: user, Password: pass, SystemType: "test"}
	connector := map[pdu.BindingType]gosmpp.Connector{
		pdu.Transmitter: gosmpp.TXConnector(gosmpp.NonTLSDialer, auth),
		pdu.Receiver:    gosmpp.RXConnector(gosmpp.NonTLSDialer, auth),
		pdu.Transceiver: gosmpp.TRXConnector(gosmpp.NonTLSDialer, auth),
	}[typ]
	settings := gosmpp.Settings{
		ReadTimeout: time.Minute, WriteTimeout: waitLimit,
		OnAllPDU: e.onPDU, OnClosed: e.onClosed,
	}
	if tune != nil {
		tune(&settings)
	}
	sess, err := gosmpp.NewSession(connector, settings, 0) // 0: no automatic rebind
	if err != nil {
		return nil, err
	}
	e.sess = sess
	t.Cleanup(func() { sess.Close() })
	return e, nil
}

func mustDial(t *testing.T, srv *smpp.Server, typ pdu.BindingType) *esme {
	t.Helper()
	e, err := dialESME(t, srv, typ, "esme1", "secret1", nil)
	if err != nil {
		t.Fatalf("binding %v: %v", typ, err)
	}
	return e
}

func (e *esme) onPDU(p pdu.PDU) (pdu.PDU, bool) {
	e.pdus <- p
	if _, ok := p.(*pdu.Unbind); ok && !e.silent.Load() {
		return p.GetResponse(), true
	}
	return nil, false
}

func (e *esme) onClosed(gosmpp.State) {
	if e.once.CompareAndSwap(false, true) {
		close(e.closed)
	}
}

// send writes p through gosmpp and returns its sequence number.
func (e *esme) send(p pdu.PDU) uint32 {
	e.t.Helper()
	if err := e.sess.Transceiver().Submit(p); err != nil {
		e.t.Fatalf("sending %T: %v", p, err)
	}
	return uint32(p.GetSequenceNumber())
}

// ack answers a deliver_sm with the given command_status.
func (e *esme) ack(d *pdu.DeliverSM, status uint32) {
	e.t.Helper()
	resp := d.GetResponse()
	resp.(*pdu.DeliverSMResp).CommandStatus = data.CommandStatusType(status)
	e.send(resp)
}

// recv waits for the next PDU; nil once the session closed and every
// PDU has been read.
func (e *esme) recv() pdu.PDU {
	e.t.Helper()
	select {
	case p := <-e.pdus:
		return p
	case <-e.closed:
		select {
		case p := <-e.pdus:
			return p
		default:
			return nil
		}
	case <-time.After(waitLimit):
		e.t.Fatal("timed out waiting for a PDU")
		return nil
	}
}

// recvAs waits for the next PDU and asserts its type.
func recvAs[T pdu.PDU](e *esme) T {
	e.t.Helper()
	p := e.recv()
	v, ok := p.(T)
	if !ok {
		e.t.Fatalf("got %T, want %T", p, v)
	}
	return v
}

func (e *esme) waitClosed() {
	e.t.Helper()
	select {
	case <-e.closed:
	case <-time.After(waitLimit):
		e.t.Fatal("session not closed")
	}
}
