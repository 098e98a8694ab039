package module_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelwork/keel/module"
)

func TestLifecycleStartStop(t *testing.T) {
	t.Parallel()
	var l module.Lifecycle
	ctx := context.Background()
	if l.Go(func(context.Context) { t.Error("ran outside a run") }) {
		t.Fatal("Go outside a run reported true")
	}
	if err := l.Stop(ctx); err != nil {
		t.Fatalf("stop before start: %v", err)
	}
	startCtx, cancelStart := context.WithCancel(ctx)
	run, err := l.Start(startCtx)
	if err != nil {
		t.Fatal(err)
	}
	cancelStart() // the start-up context ending does not end the run
	if _, err := l.Start(ctx); !errors.Is(err, module.ErrRunning) {
		t.Fatalf("second start: %v", err)
	}
	ended := make(chan struct{})
	l.Go(func(ctx context.Context) { <-ctx.Done(); close(ended) })
	select {
	case <-run.Done():
		t.Fatal("the run ended with its start-up context")
	default:
	}
	if err := l.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	default:
		t.Fatal("Stop returned before the goroutine did")
	}
	// A stuck goroutine: Stop gives up when its context ends.
	if _, err := l.Start(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	release := make(chan struct{})
	l.Go(func(context.Context) { <-release })
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := l.Stop(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop of a stuck run: %v", err)
	}
	close(release)
}

func TestLifecycleWait(t *testing.T) {
	t.Parallel()
	var l module.Lifecycle
	ctx := context.Background()
	if _, err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Stop(ctx)
	var n atomic.Int32
	for range 10 {
		l.Go(func(context.Context) { n.Add(1) })
	}
	if err := l.Wait(ctx); err != nil || n.Load() != 10 {
		t.Fatalf("wait: %v, %d ran", err, n.Load())
	}
	if !l.Running() {
		t.Fatal("Wait ended the run")
	}
}

// TestLifecycleStress starts, stops and adds goroutines from many
// goroutines at once (run it with -race): no goroutine may be running once
// a Stop that returned nil has returned for its run, and none may start in
// a run that is over.
func TestLifecycleStress(t *testing.T) {
	t.Parallel()
	var l module.Lifecycle
	ctx := context.Background()
	var live, ran atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				switch (g + i) % 4 {
				case 0:
					_, _ = l.Start(ctx)
				case 1, 2:
					l.Go(func(ctx context.Context) {
						live.Add(1)
						ran.Add(1)
						<-ctx.Done()
						live.Add(-1)
					})
				case 3:
					if err := l.Stop(ctx); err != nil {
						t.Errorf("stop: %v", err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := l.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := live.Load(); n != 0 {
		t.Fatalf("%d goroutines still running after the last Stop", n)
	}
	if ran.Load() == 0 {
		t.Fatal("no goroutine ever ran: the stress exercised nothing")
	}
	if l.Go(func(context.Context) {}) {
		t.Fatal("Go after the last Stop reported true")
	}
}
