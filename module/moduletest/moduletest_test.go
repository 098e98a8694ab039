package moduletest_test

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
)

// TestEach: each database is fresh and the module's SQL and the engine run
// on it; the host's clock is the test's.
func TestEach(t *testing.T) {
	moduletest.Each(t, nil, testEnv[pgx.Tx], testEnv[*sql.Tx])
}

func testEnv[TTx any](t *testing.T, e *moduletest.Env[TTx]) {
	ctx := context.Background()
	if _, err := e.DB.Exec(ctx, "CREATE TABLE note (id INTEGER PRIMARY KEY)"); err != nil {
		t.Fatalf("%s: a fresh database: %v", e.Name, err)
	}
	b, err := module.NewBase("notes", e.Host(map[string]string{"notes.x": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	e.Clock.Add(90 * time.Minute)
	if got := b.Now(); !got.Equal(moduletest.Start.Add(90 * time.Minute)) {
		t.Fatalf("the module reads %v, not the test's clock", got)
	}
	if err := b.Settings().Err(); err == nil {
		t.Fatal("an unknown setting passed")
	}
	if _, err := b.Client(); !errors.Is(err, module.ErrNotStarted) {
		t.Fatalf("client before Start: %v, want ErrNotStarted", err)
	}
	c := e.Client(t, nil)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	if err := b.Bind(c); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Client(); err != nil || got != c {
		t.Fatalf("bound client: %v", err)
	}
	if err := b.Bind(e.Client(t, nil)); err == nil {
		t.Fatal("a second engine client was bound")
	}
}

func TestWaitFor(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	go func() {
		for range 5 {
			n.Add(1)
		}
	}()
	moduletest.WaitFor(t, 5*time.Second, "five increments", func() bool { return n.Load() == 5 })
}
