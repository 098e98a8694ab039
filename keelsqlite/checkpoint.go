package keelsqlite

import (
	"context"
	"database/sql"
	"time"
)

// checkpointInterval is how often the background checkpointer runs.
const checkpointInterval = 500 * time.Millisecond

// checkpointer moves WAL content into the database file from its own
// connection. SQLite's automatic checkpoint runs inside the committing
// writer, where its fsync stalled the single writer for up to 300 ms at a
// time (measured: rate-limited claims landing a poll late). Open turns the
// automatic one off and runs PASSIVE checkpoints here instead: they never
// take the writer's lock, so commits keep flowing while the file syncs.
type checkpointer struct {
	db   *sql.DB
	stop chan struct{}
	done chan struct{}
}

func startCheckpointer(db *sql.DB) *checkpointer {
	c := &checkpointer{db: db, stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

func (c *checkpointer) run() {
	defer close(c.done)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			// A last full pass so a clean shutdown leaves a short WAL.
			_, _ = c.db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
			return
		case <-t.C:
			_, _ = c.db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
		}
	}
}

func (c *checkpointer) close() error {
	close(c.stop)
	<-c.done
	return c.db.Close()
}
