package cmpp_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelwork/keel/modules/delivery/cmpp"
)

// Accounts the test server knows. Each Source_Addr picks a report layout.
var accounts = map[string]cmpp.Account{
	"901234": {AppID: "app-follow", Secret: "s3cret"},
	"902000": {AppID: "app-compat60", Secret: "s3cret", ReportLayout: cmpp.V20},
	"903000": {AppID: "app-force71", Secret: "s3cret", ReportLayout: cmpp.V30},
}

const (
	testGateway = 4242
	waitLimit   = 10 * time.Second
)

var testZone = time.FixedZone("CST", 8*3600)

type submitCall struct {
	conn  *cmpp.Conn
	msgID cmpp.MsgID
	s     *cmpp.Submit
}

type ackEvent struct {
	conn  *cmpp.Conn
	seq   uint32
	msgID cmpp.MsgID // ours, for timeouts and late acks
	resp  *cmpp.DeliverResp
}

type disconnect struct {
	conn *cmpp.Conn
	err  error
}

type written struct {
	msgID  cmpp.MsgID
	result uint32
	err    error
}

// recorder is the test Handler: it turns every callback into a channel
// event so tests synchronize on them. It implements all optional
// extensions.
type recorder struct {
	result       atomic.Uint32 // what Submit answers
	connected    chan *cmpp.Conn
	disconnected chan disconnect
	submits      chan submitCall
	written      chan written
	acks         chan ackEvent
	timeouts     chan ackEvent
	late         chan ackEvent
}

func newRecorder() *recorder {
	return &recorder{
		connected:    make(chan *cmpp.Conn, 16),
		disconnected: make(chan disconnect, 16),
		submits:      make(chan submitCall, 64),
		written:      make(chan written, 64),
		acks:         make(chan ackEvent, 256),
		timeouts:     make(chan ackEvent, 64),
		late:         make(chan ackEvent, 64),
	}
}

func (r *recorder) Connected(c *cmpp.Conn) { r.connected <- c }
func (r *recorder) Disconnected(c *cmpp.Conn, err error) {
	r.disconnected <- disconnect{c, err}
}
func (r *recorder) Submit(_ context.Context, c *cmpp.Conn, id cmpp.MsgID, s *cmpp.Submit) uint32 {
	r.submits <- submitCall{c, id, s}
	return r.result.Load()
}
func (r *recorder) DeliverResp(c *cmpp.Conn, seq uint32, resp *cmpp.DeliverResp) {
	r.acks <- ackEvent{conn: c, seq: seq, resp: resp}
}
func (r *recorder) AckTimeout(c *cmpp.Conn, seq uint32, id cmpp.MsgID) {
	r.timeouts <- ackEvent{conn: c, seq: seq, msgID: id}
}
func (r *recorder) LateDeliverResp(c *cmpp.Conn, seq uint32, id cmpp.MsgID, resp *cmpp.DeliverResp) {
	r.late <- ackEvent{conn: c, seq: seq, msgID: id, resp: resp}
}
func (r *recorder) SubmitRespWritten(_ *cmpp.Conn, id cmpp.MsgID, result uint32, err error) {
	r.written <- written{id, result, err}
}

// startServer runs a server on loopback; tune adjusts the config.
func startServer(t *testing.T, tune func(*cmpp.Config)) (*cmpp.Server, *recorder) {
	t.Helper()
	rec := newRecorder()
	cfg := cmpp.Config{
		Addr:      "127.0.0.1:0",
		GatewayID: testGateway,
		Location:  testZone,
		Handler:   rec,
		Logger:    slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		Authenticate: func(_ context.Context, addr string) (*cmpp.Account, error) {
			if a, ok := accounts[addr]; ok {
				return &a, nil
			}
			return nil, nil
		},
	}
	if tune != nil {
		tune(&cfg)
	}
	srv, err := cmpp.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("closing server: %v", err)
		}
	})
	return srv, rec
}

// next waits for one value on ch.
func next[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// none asserts nothing is queued on ch right now.
func none[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected %s: %+v", what, v)
	default:
	}
}
