package smpp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/linxGnu/gosmpp"
	"github.com/linxGnu/gosmpp/data"
	"github.com/linxGnu/gosmpp/pdu"

	"github.com/keelwork/keel/modules/delivery/smpp"
)

// gosmpp's own enquire_link timer is answered.
func TestEnquireLinkFromESME(t *testing.T) {
	srv, rec := startServer(t, nil)
	e, err := dialESME(t, srv, pdu.Transceiver, "esme1", "secret1", func(s *gosmpp.Settings) {
		s.EnquireLink = 20 * time.Millisecond
	})
	if err != nil {
		t.Fatal(err)
	}
	next(t, rec.connected, "Connected")
	for range 2 {
		if r := recvAs[*pdu.EnquireLinkResp](e); r.CommandStatus != data.ESME_ROK {
			t.Errorf("enquire_link_resp status %s", r.CommandStatus)
		}
	}
}

// After EnquireLinkIdle without traffic the server probes; an answer
// keeps the link, and after EnquireLinkMisses silent probes the server
// drops it.
func TestEnquireLinkFromServer(t *testing.T) {
	srv, rec := startServer(t, func(cfg *smpp.Config) {
		cfg.EnquireLinkIdle = 50 * time.Millisecond
		cfg.EnquireLinkTimeout = 50 * time.Millisecond
	})
	e := mustDial(t, srv, pdu.Transceiver)
	conn := next(t, rec.connected, "Connected")

	probe := recvAs[*pdu.EnquireLink](e)
	e.send(probe.GetResponse())

	silent := 0
	for p := e.recv(); p != nil; p = e.recv() {
		if _, ok := p.(*pdu.EnquireLink); !ok {
			t.Fatalf("got %T, want enquire_link", p)
		}
		silent++
	}
	if silent != smpp.DefaultEnquireLinkMisses {
		t.Errorf("%d probes before the drop, want %d", silent, smpp.DefaultEnquireLinkMisses)
	}
	if d := next(t, rec.disconnected, "Disconnected"); d.conn != conn || !errors.Is(d.err, smpp.ErrEnquireLinkTimeout) {
		t.Errorf("disconnected with %v, want ErrEnquireLinkTimeout", d.err)
	}
}

// gosmpp's Close sends unbind and hangs up without waiting: a clean end.
func TestUnbindFromESME(t *testing.T) {
	srv, rec := startServer(t, nil)
	e := mustDial(t, srv, pdu.Transceiver)
	conn := next(t, rec.connected, "Connected")
	e.sess.Close()
	if d := next(t, rec.disconnected, "Disconnected"); d.conn != conn || d.err != nil {
		t.Errorf("disconnected with %v, want nil", d.err)
	}
	select {
	case <-conn.Done():
	default:
		t.Error("Done not closed")
	}
}

// The exchange on the wire: unbind_resp echoes the unbind's sequence
// number, then the server closes.
func TestUnbindFromESMERaw(t *testing.T) {
	srv, rec := startServer(t, nil)
	r := dialRaw(t, srv)
	r.bind(smpp.BindReceiver)
	next(t, rec.connected, "Connected")
	r.send(77, &smpp.Unbind{})
	r.expect(smpp.CmdUnbindResp, smpp.StatusOK, 77)
	r.expectEOF()
	if d := next(t, rec.disconnected, "Disconnected"); d.err != nil {
		t.Errorf("disconnected with %v, want nil", d.err)
	}
}

// Close sends unbind and returns once the ESME answered; an ESME that
// never answers is dropped when Close's context ends.
func TestCloseUnbindsESMEs(t *testing.T) {
	srv, rec := startServer(t, nil)
	polite := mustDial(t, srv, pdu.Transceiver)
	next(t, rec.connected, "Connected")
	if err := srv.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	recvAs[*pdu.Unbind](polite)
	polite.waitClosed()
	if d := next(t, rec.disconnected, "Disconnected"); d.err != nil {
		t.Errorf("polite ESME: %v", d.err)
	}
	if err := srv.Close(t.Context()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := srv.Start(t.Context()); !errors.Is(err, smpp.ErrServerClosed) {
		t.Errorf("Start after Close: %v", err)
	}

	srv2, rec2 := startServer(t, nil)
	rude := mustDial(t, srv2, pdu.Transceiver)
	rude.silent.Store(true)
	conn := next(t, rec2.connected, "Connected")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- srv2.Close(ctx) }()
	recvAs[*pdu.Unbind](rude)
	if _, err := conn.Deliver(t.Context(), sampleMO()); !errors.Is(err, smpp.ErrConnClosed) {
		t.Errorf("Deliver after unbind was sent: %v", err)
	}
	if err := next(t, closed, "Close"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close with a silent ESME: %v", err)
	}
	if d := next(t, rec2.disconnected, "Disconnected"); !errors.Is(d.err, smpp.ErrServerClosed) {
		t.Errorf("silent ESME: %v", d.err)
	}
}

// An ESME may answer our unbind by hanging up (a clean end), while one
// that hangs up unasked is reported as ErrPeerClosed.
func TestHangUps(t *testing.T) {
	srv, rec := startServer(t, nil)
	r := dialRaw(t, srv)
	r.bind(smpp.BindTransceiver)
	next(t, rec.connected, "Connected")
	r.nc.Close()
	if d := next(t, rec.disconnected, "Disconnected"); !errors.Is(d.err, smpp.ErrPeerClosed) {
		t.Errorf("unasked hang-up: %v", d.err)
	}

	r = dialRaw(t, srv)
	r.bind(smpp.BindTransceiver)
	next(t, rec.connected, "Connected")
	closed := make(chan error, 1)
	go func() { closed <- srv.Close(t.Context()) }()
	r.expect(smpp.CmdUnbind, 0, 1)
	r.nc.Close()
	if err := next(t, closed, "Close"); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := next(t, rec.disconnected, "Disconnected"); d.err != nil {
		t.Errorf("hang-up after our unbind: %v", d.err)
	}
}
