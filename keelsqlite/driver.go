// Package keelsqlite is Keel's embedded driver: SQLite through
// modernc.org/sqlite (pure Go, no cgo). It implements
// keeldriver.Driver[*sql.Tx] with the same semantics as keelpgx.
//
// SQLite has one writer per database file. Open therefore keeps two pools: a
// write pool with a single connection, used by every state-changing statement
// and transaction (transactions start with BEGIN IMMEDIATE), and a read pool
// with several connections for lookups, which WAL lets run beside the writer.
// Writers queue in database/sql for the one connection instead of spinning on
// SQLITE_BUSY.
//
// Notifications cannot cross processes: the Driver owns an in-process hub, so
// engine clients sharing one Driver wake each other, and other processes poll.
package keelsqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelsql/sqlfile"
	"github.com/keelwork/keel/keeltype"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

//go:embed migration/*.sql
var migrationFiles embed.FS

//go:embed queries/*.sql
var queryFiles embed.FS

// queries are the named statements of queries/*.sql; a missing or malformed
// file is a build defect, so loading panics at init.
var queries = sqlfile.MustLoad(queryFiles, "queries")

// Config tunes a Driver. The zero value (or nil) gives the defaults.
type Config struct {
	// BusyTimeout is how long a connection waits for a lock held by another
	// connection (another process, a checkpoint) before SQLITE_BUSY.
	// Default 10s.
	BusyTimeout time.Duration
	// ReadConns is the size of the read pool Open creates. Default
	// max(4, GOMAXPROCS).
	ReadConns int
	// NotifyBuffer is how many undelivered notifications each in-process
	// listener keeps before new ones are dropped. Default 1024.
	NotifyBuffer int
}

func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.BusyTimeout <= 0 {
		out.BusyTimeout = 10 * time.Second
	}
	if out.ReadConns <= 0 {
		out.ReadConns = max(4, runtime.GOMAXPROCS(0))
	}
	if out.NotifyBuffer <= 0 {
		out.NotifyBuffer = 1024
	}
	return out
}

// Driver is the SQLite keeldriver.Driver.
type Driver struct {
	w      *sql.DB // single-connection write pool
	r      *sql.DB // read pool; same as w for New
	owned  bool    // Close closes w and r
	cfg    Config
	hub    *hub
	closed atomic.Bool
	ckpt   *checkpointer // nil for New: the caller's DB keeps its settings
}

var _ keeldriver.Driver[*sql.Tx] = (*Driver)(nil)

// Open opens (creating if needed) the database file at path with WAL, the
// configured busy timeout, foreign keys and synchronous=NORMAL. In-memory
// databases are not supported: the read pool must see the writer's file.
func Open(path string, cfg *Config) (*Driver, error) {
	if path == "" || path == ":memory:" || strings.Contains(path, "mode=memory") {
		return nil, fmt.Errorf("keelsqlite: opening %q: a database file path is required", path)
	}
	c := cfg.withDefaults()
	w, err := openPool(path, c, true)
	if err != nil {
		return nil, err
	}
	r, err := openPool(path, c, false)
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	ck, err := openCheckpointPool(path, c)
	if err != nil {
		_ = w.Close()
		_ = r.Close()
		return nil, err
	}
	return &Driver{w: w, r: r, owned: true, cfg: c, hub: newHub(c.NotifyBuffer), ckpt: startCheckpointer(ck)}, nil
}

// openCheckpointPool is one connection for the background checkpointer.
func openCheckpointPool(path string, c Config) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", c.BusyTimeout.Milliseconds()))
	db, err := sql.Open("sqlite", "file:"+escapePath(path)+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("keelsqlite: opening checkpointer for %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// openPool opens the write pool (one connection, immediate transactions) or
// the read pool (query_only, so a stray write fails loudly instead of
// contending for the lock). The write pool is pinged first so that WAL mode
// is set on the file before readers attach.
func openPool(path string, c Config, write bool) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", c.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	if write {
		q.Add("_pragma", "journal_mode(WAL)")
		// The background checkpointer does this off the writer's path.
		q.Add("_pragma", "wal_autocheckpoint(0)")
		q.Set("_txlock", "immediate")
	} else {
		q.Add("_pragma", "query_only(1)")
	}
	// cachingDriverName: modernc's "sqlite" driver with each connection's
	// statements kept compiled (stmtcache.go).
	db, err := sql.Open(cachingDriverName, "file:"+escapePath(path)+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("keelsqlite: opening %s: %w", path, err)
	}
	if write {
		db.SetMaxOpenConns(1)
	} else {
		db.SetMaxOpenConns(c.ReadConns)
		db.SetMaxIdleConns(c.ReadConns)
	}
	// Connections carry their pragmas; never recycle them for age.
	db.SetConnMaxLifetime(0)
	if err := db.PingContext(context.Background()); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("keelsqlite: opening %s: %w", path, err)
	}
	return db, nil
}

// escapePath makes a file path safe inside a file: URI, where SQLite
// decodes %XX and treats ? and # as delimiters.
func escapePath(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
}

// New wraps a caller's *sql.DB (opened with the "sqlite" driver). Reads and
// writes share it; for the single-writer behaviour of Open, the caller should
// open it with _txlock=immediate and a busy_timeout, and set
// SetMaxOpenConns(1) if writers must never wait on SQLITE_BUSY. The caller
// owns db: Close does not close it.
func New(db *sql.DB, cfg *Config) (*Driver, error) {
	if db == nil {
		return nil, fmt.Errorf("keelsqlite: New: nil *sql.DB: %w", keeltype.ErrInvalidArgument)
	}
	c := cfg.withDefaults()
	return &Driver{w: db, r: db, cfg: c, hub: newHub(c.NotifyBuffer)}, nil
}

// DB returns the write pool, for callers who open their own transactions and
// hand them to UnwrapExecutor. With Open the pool has one connection: while
// such a transaction is open, run engine statements through UnwrapExecutor,
// not Executor, or they wait for the transaction to end.
func (d *Driver) DB() *sql.DB { return d.w }

// Executor runs each operation in its own short write transaction (or on the
// read pool for lookups).
func (d *Driver) Executor() keeldriver.Executor { return &executor{d: d} }

// UnwrapExecutor runs engine statements inside the caller's transaction.
// Commit and Rollback on the result are no-ops: the caller owns tx.
func (d *Driver) UnwrapExecutor(tx *sql.Tx) keeldriver.ExecutorTx {
	return &executor{d: d, tx: tx}
}

// UnwrapTx returns the *sql.Tx behind an ExecutorTx made by this package, or
// nil for any other value.
func (d *Driver) UnwrapTx(tx keeldriver.ExecutorTx) *sql.Tx {
	if e, ok := tx.(*executor); ok {
		return e.tx
	}
	return nil
}

// Dialect is "sqlite".
func (d *Driver) Dialect() string { return "sqlite" }

// Migrations returns the engine migrations with the NNN_name.up.sql and
// .down.sql files at the root.
func (d *Driver) Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migration")
	if err != nil {
		panic(err) // embedded path is a compile-time constant
	}
	return sub
}

// SupportsListener is false: notifications stay inside this process.
func (d *Driver) SupportsListener() bool { return false }

// Listener returns a listener attached to this Driver's in-process hub.
func (d *Driver) Listener() keeldriver.Listener { return d.hub.newListener() }

// Notify delivers payload to this Driver's listeners on topic. It never
// blocks: a listener whose buffer is full loses the message but still wakes.
func (d *Driver) Notify(ctx context.Context, topic string, payload string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("keelsqlite: notifying %s: %w", topic, err)
	}
	if d.closed.Load() {
		return keeldriver.ErrClosed
	}
	d.hub.publish(topic, payload)
	return nil
}

// Close stops the hub (waking every waiting listener with ErrClosed) and,
// for Open, closes both pools.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.hub.close()
	if !d.owned {
		return nil
	}
	return errors.Join(d.ckpt.close(), d.r.Close(), d.w.Close())
}
