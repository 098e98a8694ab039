package framewriter_test

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/keelwork/keel/modules/delivery/internal/framewriter"
)

// TestOrderStopAndFailure: frames arrive in order, queued frames are
// written on Stop, a stopped writer refuses new frames, and a failed write
// reports once and ends the writer.
func TestOrderStopAndFailure(t *testing.T) {
	a, b := net.Pipe()
	failed := make(chan error, 2)
	w := framewriter.New(a, 8, time.Second, func(err error) { failed <- err })
	go w.Run()
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 6)
		_, _ = io.ReadFull(b, buf)
		got <- buf
	}()
	if err := w.Send([]byte("ab")); err != nil {
		t.Fatal(err)
	}
	if err := w.SendWait([]byte("cd")); err != nil {
		t.Fatal(err)
	}
	if err := w.Send([]byte("ef")); err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if s := string(<-got); s != "abcdef" {
		t.Fatalf("read %q, want abcdef in order", s)
	}
	if err := w.SendWait([]byte("x")); !errors.Is(err, framewriter.ErrStopped) {
		t.Fatalf("after stop: %v, want ErrStopped", err)
	}

	c, d := net.Pipe()
	d.Close()
	w2 := framewriter.New(c, 8, time.Second, func(err error) { failed <- err })
	go w2.Run()
	if err := w2.SendWait([]byte("y")); err == nil {
		t.Fatal("write to a closed peer succeeded")
	}
	if err := <-failed; err == nil {
		t.Fatal("no failure reported")
	}
	if err := w2.SendWait([]byte("z")); !errors.Is(err, framewriter.ErrStopped) {
		t.Fatalf("after a failed write: %v, want ErrStopped", err)
	}
}
