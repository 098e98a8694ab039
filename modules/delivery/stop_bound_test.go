package delivery

import (
	"context"
	"testing"
	"time"

	"github.com/keelwork/keel/keelsqlite"
)

// TestStopBoundedWhileTheWriterIsHeld: on SQLite every statement queues
// for the one write connection. With it held elsewhere (here an open
// transaction; in a stopping keel dev, the engine's claims), Stop still
// returns within its context's deadline plus the presence drop's own
// short bound, and says the drop did not happen.
func TestStopBoundedWhileTheWriterIsHeld(t *testing.T) {
	t.Parallel()
	e := newSQLiteEnv(t)
	i := e.start(testSettings())
	tx, err := e.d.(*keelsqlite.Driver).DB().BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()

	const grace = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- i.m.Stop(ctx) }()
	// The bound asserted is the stop's promise, with room for a loaded
	// machine; before the drop was bounded this waited for the writer
	// for as long as it was held.
	limit := grace + presenceDropTimeout + 10*time.Second
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("Stop returned nil after %s although the presence drop could not write", time.Since(start))
		}
		t.Logf("Stop returned after %s: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(limit):
		t.Fatalf("Stop still waiting after %s with the write connection held", limit)
	}
}
