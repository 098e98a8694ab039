package smpp_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelwork/keel/modules/delivery/smpp"
)

// Accounts the test server knows, by system_id.
var accounts = map[string]struct{ password, app string }{
	"esme1": {"secret1", "app-1"},
	"esme2": {"secret2", "app-2"},
}

const (
	testSystemID = "keel-test"
	brokenLookup = "broken" // Authenticate fails with a lookup error
	waitLimit    = 10 * time.Second
)

var errLookup = errors.New("account store unavailable")

type submitCall struct {
	conn *smpp.Conn
	id   string
	s    *smpp.SubmitSM
}

type ackEvent struct {
	conn *smpp.Conn
	seq  uint32
	resp *smpp.DeliverSMResp
}

type disconnect struct {
	conn *smpp.Conn
	err  error
}

type written struct {
	id     string
	status uint32
	err    error
}

// recorder is the test Handler: every callback becomes a channel event
// so tests synchronize on them. It implements all optional extensions.
type recorder struct {
	status       atomic.Uint32 // what Submit answers
	connected    chan *smpp.Conn
	disconnected chan disconnect
	submits      chan submitCall
	written      chan written
	acks         chan ackEvent
	timeouts     chan ackEvent
	late         chan ackEvent
}

func newRecorder() *recorder {
	return &recorder{
		connected:    make(chan *smpp.Conn, 16),
		disconnected: make(chan disconnect, 16),
		submits:      make(chan submitCall, 64),
		written:      make(chan written, 64),
		acks:         make(chan ackEvent, 256),
		timeouts:     make(chan ackEvent, 64),
		late:         make(chan ackEvent, 64),
	}
}

func (r *recorder) Connected(c *smpp.Conn) { r.connected <- c }
func (r *recorder) Disconnected(c *smpp.Conn, err error) {
	r.disconnected <- disconnect{c, err}
}
func (r *recorder) Submit(_ context.Context, c *smpp.Conn, id string, s *smpp.SubmitSM) uint32 {
	r.submits <- submitCall{c, id, s}
	return r.status.Load()
}
func (r *recorder) DeliverResp(c *smpp.Conn, seq uint32, resp *smpp.DeliverSMResp) {
	r.acks <- ackEvent{c, seq, resp}
}
func (r *recorder) AckTimeout(c *smpp.Conn, seq uint32) { r.timeouts <- ackEvent{conn: c, seq: seq} }
func (r *recorder) LateDeliverResp(c *smpp.Conn, seq uint32, resp *smpp.DeliverSMResp) {
	r.late <- ackEvent{c, seq, resp}
}
func (r *recorder) SubmitRespWritten(_ *smpp.Conn, id string, status uint32, err error) {
	r.written <- written{id, status, err}
}

func authenticate(_ context.Context, systemID, password string) (*smpp.Account, error) {
	if systemID == brokenLookup {
		return nil, errLookup
	}
	a, ok := accounts[systemID]
	switch {
	case !ok:
		return nil, smpp.ErrInvalidSystemID
	case a.password != password:
		return nil, smpp.ErrInvalidPassword
	}
	return &smpp.Account{AppID: a.app}, nil
}

// startServer runs a server on loopback; tune adjusts the config.
func startServer(t *testing.T, tune func(*smpp.Config)) (*smpp.Server, *recorder) {
	t.Helper()
	rec := newRecorder()
	cfg := smpp.Config{
		Addr: "127.0.0.1:0", SystemID: testSystemID, NodeID: 7,
		Handler: rec, Authenticate: authenticate,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if tune != nil {
		tune(&cfg)
	}
	srv, err := smpp.NewServer(cfg)
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
