package cmpp_test

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	gocmpp "github.com/bigwhite/gocmpp"

	"github.com/keelwork/keel/modules/delivery/cmpp"
)

// client is a customer using the real gocmpp client. The test owns the
// read side: a reader goroutine forwards every packet to pkts, answering
// only TERMINATE by itself (unless silent), so each test decides whether
// and when to ACK.
type client struct {
	t      *testing.T
	cli    *gocmpp.Client
	typ    gocmpp.Type
	pkts   chan any
	done   chan struct{} // the reader stopped (the socket ended)
	silent atomic.Bool   // do not answer the server's TERMINATE

	lastContent string // Msg_Content of the last report read
}

func dial(t *testing.T, srv *cmpp.Server, typ gocmpp.Type, user, secret string) (*client, error) {
	t.Helper()
	cli := gocmpp.NewClient(typ)
	if err := cli.Connect(srv.Addr().String(), user, secret, waitLimit); err != nil {
		return nil, err
	}
	c := &client{t: t, cli: cli, typ: typ, pkts: make(chan any, 256), done: make(chan struct{})}
	go c.read()
	t.Cleanup(c.close)
	return c, nil
}

func mustDial(t *testing.T, srv *cmpp.Server, typ gocmpp.Type, user string) *client {
	t.Helper()
	c, err := dial(t, srv, typ, user, "s3cret")
	if err != nil {
		t.Fatalf("connecting %s as %s: %v", typ, user, err)
	}
	return c
}

func (c *client) read() {
	defer close(c.done)
	for {
		p, err := c.cli.RecvAndUnpackPkt(0)
		if err != nil {
			return
		}
		if term, ok := p.(*gocmpp.CmppTerminateReqPkt); ok && !c.silent.Load() {
			c.cli.SendRspPkt(&gocmpp.CmppTerminateRspPkt{}, term.SeqId)
		}
		c.pkts <- p
	}
}

// close ends the session politely if it is still up, then frees the
// client once its reader has stopped (gocmpp's Disconnect is not safe
// while a read is running).
func (c *client) close() {
	select {
	case <-c.done:
	default:
		c.cli.SendReqPkt(&gocmpp.CmppTerminateReqPkt{})
		select {
		case <-c.done:
		case <-time.After(waitLimit):
			c.t.Errorf("client reader did not stop")
			return
		}
	}
	c.cli.Disconnect()
}

func (c *client) send(p gocmpp.Packer) uint32 {
	c.t.Helper()
	seq, err := c.cli.SendReqPkt(p)
	if err != nil {
		c.t.Fatalf("sending %T: %v", p, err)
	}
	return seq
}

func (c *client) reply(p gocmpp.Packer, seq uint32) {
	c.t.Helper()
	if err := c.cli.SendRspPkt(p, seq); err != nil {
		c.t.Fatalf("replying %T: %v", p, err)
	}
}

// ack answers a DELIVER with the given result in the client's layout.
func (c *client) ack(seq uint32, msgID uint64, result uint32) {
	c.t.Helper()
	if c.typ == gocmpp.V30 {
		c.reply(&gocmpp.Cmpp3DeliverRspPkt{MsgId: msgID, Result: result}, seq)
	} else {
		c.reply(&gocmpp.Cmpp2DeliverRspPkt{MsgId: msgID, Result: uint8(result)}, seq)
	}
}

func (c *client) recv() any {
	c.t.Helper()
	select {
	case p := <-c.pkts:
		return p
	case <-c.done:
		select {
		case p := <-c.pkts:
			return p
		default:
		}
		c.t.Fatal("connection ended while waiting for a packet")
	case <-time.After(waitLimit):
		c.t.Fatal("timed out waiting for a packet")
	}
	return nil
}

// recvAs waits for the next packet and asserts its type.
func recvAs[T any](c *client) T {
	c.t.Helper()
	p := c.recv()
	v, ok := p.(T)
	if !ok {
		c.t.Fatalf("got %T, want %T", p, v)
	}
	return v
}

// waitClosed waits for the server to end the socket.
func (c *client) waitClosed() {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(waitLimit):
		c.t.Fatal("server did not close the connection")
	}
}

// deliverSeq reads a DELIVER in either layout and returns seq and Msg_Id.
func (c *client) deliverSeq() (uint32, uint64) {
	c.t.Helper()
	switch p := c.recv().(type) {
	case *gocmpp.Cmpp3DeliverReqPkt:
		return p.SeqId, p.MsgId
	case *gocmpp.Cmpp2DeliverReqPkt:
		return p.SeqId, p.MsgId
	default:
		c.t.Fatalf("got %T, want a DELIVER", p)
	}
	return 0, 0
}

// rawConn is a socket speaking gocmpp's packets without gocmpp.Client,
// for handshakes and frames a well-behaved client never sends.
type rawConn struct {
	*gocmpp.Conn
	t *testing.T
}

func dialRaw(t *testing.T, srv *cmpp.Server, typ gocmpp.Type) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := gocmpp.NewConn(nc, typ)
	c.SetState(gocmpp.CONN_CONNECTED)
	t.Cleanup(c.Close)
	return &rawConn{Conn: c, t: t}
}

// login sends CONNECT with the given version byte and returns the answer.
func (r *rawConn) login(user string, version gocmpp.Type) any {
	r.t.Helper()
	if err := r.SendPkt(&gocmpp.CmppConnReqPkt{SrcAddr: user, Secret: "s3cret", Version: version}, 0); err != nil {
		r.t.Fatal(err)
	}
	p, err := r.RecvAndUnpackPkt(waitLimit)
	if err != nil {
		r.t.Fatalf("reading CONNECT_RESP: %v", err)
	}
	return p
}

// expectEOF asserts the server closes the socket.
func (r *rawConn) expectEOF() {
	r.t.Helper()
	if p, err := r.RecvAndUnpackPkt(waitLimit); err == nil {
		r.t.Fatalf("connection still open, got %T", p)
	}
}
