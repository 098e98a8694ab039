package gwconn_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/keelwork/keel/modules/delivery/internal/gwconn"
)

// testErrors stand for a protocol's error values.
var testErrors = gwconn.Errors{ConnClosed: errors.New("conn closed"), WindowFull: errors.New("window full"),
	ServerClosed: errors.New("server closed"), PeerClosed: errors.New("peer closed")}

type expiry struct {
	seq uint32
	v   string
}

// newSession returns a started session whose peer end is drained.
func newSession(t *testing.T, cfg gwconn.Config, probe func() error, silent func(*gwconn.Session[string])) (*gwconn.Session[string], chan expiry) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { b.Close() })
	go func() { _, _ = io.Copy(io.Discard, b) }()
	expired := make(chan expiry, 8)
	var s *gwconn.Session[string]
	s = gwconn.NewSession(a, cfg, probe, func() { silent(s) }, func(seq uint32, v string) { expired <- expiry{seq, v} })
	s.Start()
	return s, expired
}

func request(ctx context.Context, s *gwconn.Session[string], seq uint32, v string) error {
	got, err := s.Request(ctx, "req", func() (uint32, string, []byte, error) { return seq, v, []byte(v), nil })
	if err == nil && got != seq {
		return fmt.Errorf("Request returned seq %d, want %d", got, seq)
	}
	return err
}

// TestWindow: a full window refuses with WindowFull once ctx ends, a
// response frees a slot for a waiting request, an unknown response frees
// nothing, and a timed-out request is reported once and then late.
func TestWindow(t *testing.T) {
	cfg := gwconn.Config{Window: 2, WriteTimeout: time.Second, AckTimeout: time.Hour,
		LinkIdle: time.Hour, LinkTimeout: time.Hour, LinkMisses: 1, Errors: testErrors}
	s, _ := newSession(t, cfg, func() error { return nil }, func(*gwconn.Session[string]) {})
	bg := context.Background()
	if err := errors.Join(request(bg, s, 1, "a"), request(bg, s, 2, "b")); err != nil {
		t.Fatal(err)
	}
	if n := s.InFlight(); n != 2 {
		t.Fatalf("InFlight %d, want 2", n)
	}
	short, cancel := context.WithTimeout(bg, 10*time.Millisecond)
	defer cancel()
	if err := request(short, s, 3, "c"); !errors.Is(err, testErrors.WindowFull) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("full window: %v, want WindowFull and the deadline", err)
	}
	waiting := make(chan error, 1)
	go func() { waiting <- request(bg, s, 3, "c") }()
	if _, ok := s.Resolve(99); ok {
		t.Fatal("resolved a seq never sent")
	}
	if v, ok := s.Resolve(1); !ok || v != "a" {
		t.Fatalf("Resolve(1) = %q, %v; want a, true", v, ok)
	}
	if err := <-waiting; err != nil {
		t.Fatalf("request after a freed slot: %v", err)
	}
	if !s.Outstanding(2) || !s.Outstanding(3) || s.Outstanding(1) {
		t.Fatal("outstanding set is not {2, 3}")
	}
	s.Stop()
	if err := request(bg, s, 4, "d"); !errors.Is(err, testErrors.ConnClosed) {
		t.Fatalf("request after Stop: %v, want ConnClosed", err)
	}
	if err := s.Finish(nil); err != nil {
		t.Fatalf("Finish: %v, want the clean end", err)
	}
}

func TestAckTimeout(t *testing.T) {
	cfg := gwconn.Config{Window: 1, WriteTimeout: time.Second, AckTimeout: time.Millisecond,
		LinkIdle: time.Hour, LinkTimeout: time.Hour, LinkMisses: 1, Errors: testErrors}
	s, expired := newSession(t, cfg, func() error { return nil }, func(*gwconn.Session[string]) {})
	if err := request(context.Background(), s, 7, "x"); err != nil {
		t.Fatal(err)
	}
	if e := <-expired; e != (expiry{7, "x"}) {
		t.Fatalf("expired %+v, want seq 7 x", e)
	}
	if n := s.InFlight(); n != 0 {
		t.Fatalf("InFlight %d after the timeout, want 0", n)
	}
	if _, ok := s.Resolve(7); ok {
		t.Fatal("a timed-out request still resolves")
	}
	if v, ok := s.TakeLate(7); !ok || v != "x" {
		t.Fatalf("TakeLate(7) = %q, %v; want x, true", v, ok)
	}
	if _, ok := s.TakeLate(7); ok {
		t.Fatal("a late request is reported twice")
	}
	s.Stop()
	s.Finish(nil)
}

// TestKeepaliveMisses: a peer that never answers gets LinkMisses probes,
// then the session is declared silent and ends with that cause.
func TestKeepaliveMisses(t *testing.T) {
	cfg := gwconn.Config{Window: 1, WriteTimeout: time.Second, AckTimeout: time.Hour,
		LinkIdle: time.Millisecond, LinkTimeout: time.Millisecond, LinkMisses: 3, Errors: testErrors}
	silence := errors.New("peer silent")
	probes := make(chan struct{}, 10)
	silent := make(chan int, 1)
	s, _ := newSession(t, cfg, func() error { probes <- struct{}{}; return nil }, func(s *gwconn.Session[string]) {
		silent <- len(probes)
		s.Abort(silence)
	})
	if n := <-silent; n != 3 {
		t.Fatalf("silent after %d probes, want 3", n)
	}
	<-s.Context().Done()
	s.Stop()
	if err := s.Finish(nil); !errors.Is(err, silence) {
		t.Fatalf("Finish: %v, want the silence", err)
	}
}

type testConn struct {
	nc  net.Conn
	end chan error
}

func (c *testConn) stop(err error) {
	select {
	case c.end <- err:
	default:
	}
}

// TestServerClose: Close ends served connections through Terminate, or
// through Abort once ctx ends, stops the accept loop, and refuses Listen.
func TestServerClose(t *testing.T) {
	for _, polite := range []bool{true, false} {
		served := make(chan *testConn, 1)
		aborted := make(chan error, 1)
		srv := gwconn.NewServer(gwconn.Hooks[*testConn]{
			Proto: "test", Log: slog.New(slog.DiscardHandler), Closed: testErrors.ServerClosed,
			New: func(nc net.Conn, _ string, _ *slog.Logger) *testConn {
				return &testConn{nc: nc, end: make(chan error, 1)}
			},
			Serve: func(c *testConn) { served <- c; <-c.end; c.nc.Close() },
			Terminate: func(c *testConn) {
				if polite {
					c.stop(nil)
				}
			},
			Abort: func(c *testConn, err error) { aborted <- err; c.stop(err) },
		})
		if err := srv.Listen(context.Background(), "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		nc, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		<-served
		ctx, cancel := context.WithCancel(context.Background())
		if !polite {
			cancel()
		}
		err = srv.Close(ctx)
		cancel()
		if polite && err != nil {
			t.Fatalf("polite Close: %v", err)
		}
		if !polite && (!errors.Is(err, context.Canceled) || !errors.Is(<-aborted, testErrors.ServerClosed)) {
			t.Fatalf("Close past its context: %v, want the context's error after an abort", err)
		}
		if err := srv.Listen(context.Background(), "127.0.0.1:0"); !errors.Is(err, testErrors.ServerClosed) {
			t.Fatalf("Listen after Close: %v, want Closed", err)
		}
		if _, err := net.Dial("tcp", srv.Addr().String()); err == nil {
			t.Fatal("the listener still accepts after Close")
		}
	}
}
