package delivery

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelwork/keel"
)

// TestApplierStopEndsRetries: a wake or settle retry never runs after the
// applier stopped. One not yet due is cancelled; one already running is
// waited for, so nothing calls the engine once the module's Stop returned
// (the host closes the driver right after).
func TestApplierStopEndsRetries(t *testing.T) {
	t.Parallel()
	p := newApplier[any](nil, func() *keel.Client[any] { return nil }, slog.New(slog.DiscardHandler))
	var late atomic.Bool
	p.after(time.Hour, func() { late.Store(true) })

	running, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	p.after(0, func() {
		close(running)
		<-release
		finished.Store(true)
	})
	<-running
	stopped := make(chan struct{})
	go func() {
		p.stop()
		close(stopped)
	}()
	waitFor(t, 10*time.Second, "stop to cancel the retries", func() bool {
		p.tmu.Lock()
		defer p.tmu.Unlock()
		return p.stopped
	})
	select {
	case <-stopped:
		t.Fatal("stop returned while a retry was still running")
	default:
	}
	close(release)
	<-stopped
	if !finished.Load() {
		t.Fatal("stop returned before the running retry finished")
	}
	p.after(0, func() { late.Store(true) })
	if late.Load() {
		t.Fatal("a retry ran after stop")
	}
	p.tmu.Lock()
	n := len(p.timers)
	p.tmu.Unlock()
	if n != 0 {
		t.Fatalf("%d retries still scheduled after stop", n)
	}
}
