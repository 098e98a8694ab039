package keelsqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"reflect"
	"sync"

	"modernc.org/sqlite"
)

// The pools open connections through cachingDriver, which keeps each
// connection's prepared statements by SQL text. modernc's conn prepares
// every Exec and Query afresh, and the engine's statements (the claim's
// recursive CTEs above all) cost more to compile than to run: on the one
// writer connection, which every claim, heartbeat and completion of a
// process shares, compiling them again on every call is most of the time
// the writer is held. A statement is compiled once per connection instead.
//
// A cached statement is in use while rows it returned are open; a second
// use of the same text meanwhile (a query issued while iterating another's
// rows in one transaction) gets a statement of its own, closed after it.

const cachingDriverName = "keelsqlite"

// stmtCacheSize bounds the statements kept per connection; the engine and
// the modules use a few hundred distinct texts at most.
const stmtCacheSize = 512

func init() {
	sql.Register(cachingDriverName, cachingDriver{&sqlite.Driver{}})
}

type cachingDriver struct{ base driver.Driver }

func (d cachingDriver) Open(name string) (driver.Conn, error) {
	c, err := d.base.Open(name)
	if err != nil {
		return nil, err
	}
	return &cachingConn{base: c, stmts: map[string]*cachedStmt{}}, nil
}

// baseConn is what modernc's connection implements and the wrapper uses.
type baseConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
}

type cachingConn struct {
	base  driver.Conn
	mu    sync.Mutex
	stmts map[string]*cachedStmt
}

type cachedStmt struct {
	st   driver.Stmt
	busy bool
}

var (
	_ driver.ConnBeginTx        = (*cachingConn)(nil)
	_ driver.ConnPrepareContext = (*cachingConn)(nil)
	_ driver.ExecerContext      = (*cachingConn)(nil)
	_ driver.QueryerContext     = (*cachingConn)(nil)
	_ driver.Pinger             = (*cachingConn)(nil)
	_ driver.SessionResetter    = (*cachingConn)(nil)
	_ driver.Validator          = (*cachingConn)(nil)
)

func (c *cachingConn) Prepare(query string) (driver.Stmt, error) { return c.base.Prepare(query) }

func (c *cachingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.base.(baseConn).PrepareContext(ctx, query)
}

func (c *cachingConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *cachingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.base.(baseConn).BeginTx(ctx, opts)
}

func (c *cachingConn) Ping(ctx context.Context) error {
	if p, ok := c.base.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *cachingConn) ResetSession(ctx context.Context) error {
	if r, ok := c.base.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *cachingConn) IsValid() bool {
	if v, ok := c.base.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *cachingConn) Close() error {
	c.mu.Lock()
	for q, s := range c.stmts {
		_ = s.st.Close()
		delete(c.stmts, q)
	}
	c.mu.Unlock()
	return c.base.Close()
}

// take returns a statement for query, marked busy, and whether it is the
// cached one (a fresh one is the caller's to close).
func (c *cachingConn) take(ctx context.Context, query string) (*cachedStmt, bool, error) {
	c.mu.Lock()
	if s, ok := c.stmts[query]; ok && !s.busy {
		s.busy = true
		c.mu.Unlock()
		return s, true, nil
	} else if ok {
		c.mu.Unlock()
		st, err := c.PrepareContext(ctx, query)
		if err != nil {
			return nil, false, err
		}
		return &cachedStmt{st: st, busy: true}, false, nil
	}
	c.mu.Unlock()
	st, err := c.PrepareContext(ctx, query)
	if err != nil {
		return nil, false, err
	}
	s := &cachedStmt{st: st, busy: true}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, raced := c.stmts[query]; raced {
		return s, false, nil
	}
	if len(c.stmts) >= stmtCacheSize {
		for q, old := range c.stmts {
			if !old.busy {
				_ = old.st.Close()
				delete(c.stmts, q)
				break
			}
		}
	}
	c.stmts[query] = s
	return s, true, nil
}

func (c *cachingConn) release(s *cachedStmt, cached bool) {
	if !cached {
		_ = s.st.Close()
		return
	}
	c.mu.Lock()
	s.busy = false
	c.mu.Unlock()
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	s, cached, err := c.take(ctx, query)
	if err != nil {
		return nil, err
	}
	defer c.release(s, cached)
	return s.st.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	s, cached, err := c.take(ctx, query)
	if err != nil {
		return nil, err
	}
	r, err := s.st.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		c.release(s, cached)
		return nil, err
	}
	return &cachedRows{Rows: r, done: func() { c.release(s, cached) }}, nil
}

// cachedRows hands its statement back when closed, and passes on the
// column type information modernc's rows carry.
type cachedRows struct {
	driver.Rows
	once sync.Once
	done func()
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	r.once.Do(r.done)
	return err
}

func (r *cachedRows) ColumnTypeDatabaseTypeName(i int) string {
	if t, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *cachedRows) ColumnTypeScanType(i int) reflect.Type {
	if t, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return t.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}

func (r *cachedRows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeNullable); ok {
		return t.ColumnTypeNullable(i)
	}
	return false, false
}
