package cmpp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	gocmpp "github.com/bigwhite/gocmpp"

	"github.com/keelwork/keel/modules/delivery/cmpp"
)

func TestActiveTestFromClient(t *testing.T) {
	srv, rec := startServer(t, nil)
	for _, typ := range []gocmpp.Type{gocmpp.V20, gocmpp.V30} {
		c := mustDial(t, srv, typ, "901234")
		next(t, rec.connected, "Connected")
		seq := c.send(&gocmpp.CmppActiveTestReqPkt{})
		if r := recvAs[*gocmpp.CmppActiveTestRspPkt](c); r.SeqId != seq {
			t.Errorf("%s: ACTIVE_TEST_RESP seq %d, want %d", typ, r.SeqId, seq)
		}
	}
}

// After ActiveTestIdle without traffic the server probes; an answer keeps
// the link, and after ActiveTestMisses silent probes the server drops it.
func TestActiveTestFromServer(t *testing.T) {
	srv, rec := startServer(t, func(cfg *cmpp.Config) {
		cfg.ActiveTestIdle = 50 * time.Millisecond
		cfg.ActiveTestTimeout = 50 * time.Millisecond
	})
	c := mustDial(t, srv, gocmpp.V30, "901234")
	conn := next(t, rec.connected, "Connected")

	probe := recvAs[*gocmpp.CmppActiveTestReqPkt](c)
	c.reply(&gocmpp.CmppActiveTestRspPkt{}, probe.SeqId)

	silent := 0
	for {
		p := c.recvOrEnd()
		if p == nil {
			break
		}
		if _, ok := p.(*gocmpp.CmppActiveTestReqPkt); !ok {
			t.Fatalf("got %T, want ACTIVE_TEST", p)
		}
		silent++
	}
	if silent != cmpp.DefaultActiveTestMisses {
		t.Errorf("%d probes before the drop, want %d", silent, cmpp.DefaultActiveTestMisses)
	}
	d := next(t, rec.disconnected, "Disconnected")
	if d.conn != conn || !errors.Is(d.err, cmpp.ErrActiveTestTimeout) {
		t.Errorf("disconnected with %v, want ErrActiveTestTimeout", d.err)
	}
}

// recvOrEnd returns the next packet, or nil once the server closed the
// socket and every packet has been read.
func (c *client) recvOrEnd() any {
	c.t.Helper()
	select {
	case p := <-c.pkts:
		return p
	case <-c.done:
		select {
		case p := <-c.pkts:
			return p
		default:
			return nil
		}
	case <-time.After(waitLimit):
		c.t.Fatal("timed out waiting for a packet or the end")
		return nil
	}
}

func TestTerminateFromClient(t *testing.T) {
	srv, rec := startServer(t, nil)
	c := mustDial(t, srv, gocmpp.V20, "901234")
	conn := next(t, rec.connected, "Connected")
	seq := c.send(&gocmpp.CmppTerminateReqPkt{})
	if r := recvAs[*gocmpp.CmppTerminateRspPkt](c); r.SeqId != seq {
		t.Errorf("TERMINATE_RESP seq %d, want %d", r.SeqId, seq)
	}
	c.waitClosed()
	d := next(t, rec.disconnected, "Disconnected")
	if d.conn != conn || d.err != nil {
		t.Errorf("disconnected with %v, want nil", d.err)
	}
	select {
	case <-conn.Done():
	default:
		t.Error("Done not closed")
	}
}

// Close sends TERMINATE and returns once the client answered; a client
// that never answers is dropped when Close's context ends.
func TestCloseTerminatesClients(t *testing.T) {
	srv, rec := startServer(t, nil)
	polite := mustDial(t, srv, gocmpp.V30, "901234")
	next(t, rec.connected, "Connected")
	if err := srv.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	recvAs[*gocmpp.CmppTerminateReqPkt](polite)
	polite.waitClosed()
	if d := next(t, rec.disconnected, "Disconnected"); d.err != nil {
		t.Errorf("polite client: %v", d.err)
	}
	if err := srv.Close(t.Context()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := srv.Start(t.Context()); !errors.Is(err, cmpp.ErrServerClosed) {
		t.Errorf("Start after Close: %v", err)
	}

	srv2, rec2 := startServer(t, nil)
	rude := mustDial(t, srv2, gocmpp.V20, "901234")
	rude.silent.Store(true)
	conn := next(t, rec2.connected, "Connected")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- srv2.Close(ctx) }()
	recvAs[*gocmpp.CmppTerminateReqPkt](rude)
	if _, err := conn.Deliver(t.Context(), report(1)); !errors.Is(err, cmpp.ErrConnClosed) {
		t.Errorf("Deliver after TERMINATE was sent: %v", err)
	}
	if err := next(t, closed, "Close"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close with a silent client: %v", err)
	}
	if d := next(t, rec2.disconnected, "Disconnected"); !errors.Is(d.err, cmpp.ErrServerClosed) {
		t.Errorf("silent client: %v", d.err)
	}
	rude.waitClosed()
}

// A client may answer our TERMINATE by closing the socket; that is a
// clean end too.
func TestCloseClientHangsUp(t *testing.T) {
	srv, rec := startServer(t, nil)
	raw := dialRaw(t, srv, gocmpp.V30)
	raw.login("901234", gocmpp.V30)
	next(t, rec.connected, "Connected")
	closed := make(chan error, 1)
	go func() { closed <- srv.Close(t.Context()) }()
	p, err := raw.RecvAndUnpackPkt(waitLimit)
	if _, ok := p.(*gocmpp.CmppTerminateReqPkt); !ok || err != nil {
		t.Fatalf("got %T (%v), want TERMINATE", p, err)
	}
	raw.Close()
	if err := next(t, closed, "Close"); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := next(t, rec.disconnected, "Disconnected"); d.err != nil {
		t.Errorf("disconnected with %v, want nil", d.err)
	}
}

// A Command_Id the server does not handle (here FWD, and an invented one)
// closes the connection.
func TestUnknownCommandCloses(t *testing.T) {
	srv, rec := startServer(t, nil)
	for _, body := range [][]byte{
		frame(uint32(cmpp.CmdFwd), nil),
		frame(0x00000042, []byte{1, 2, 3}),
	} {
		raw := dialRaw(t, srv, gocmpp.V30)
		raw.login("901234", gocmpp.V30)
		next(t, rec.connected, "Connected")
		if _, err := raw.Write(body); err != nil {
			t.Fatal(err)
		}
		raw.expectEOF()
		if d := next(t, rec.disconnected, "Disconnected"); !errors.Is(d.err, cmpp.ErrUnknownCommand) {
			t.Errorf("disconnected with %v, want ErrUnknownCommand", d.err)
		}
	}
}
