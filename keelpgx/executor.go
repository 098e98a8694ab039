package keelpgx

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelwork/keel/keeldriver"
)

// dbtx is what both the pool and a pgx.Tx offer, so one executor
// implementation serves both.
type dbtx interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
}

// executor implements keeldriver.Executor over a dbtx. claim runs the
// claim statements: the claim pool for the pool's executor, the same
// transaction inside one.
type executor struct {
	d     *Driver
	db    dbtx
	claim dbtx
}

var _ keeldriver.Executor = (*executor)(nil)

// Begin starts a transaction on the pool, or a savepoint (pgx nested
// transaction) when the executor already runs in one.
func (e *executor) Begin(ctx context.Context) (keeldriver.ExecutorTx, error) {
	tx, err := e.db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: beginning transaction: %w", err)
	}
	return &executorTx{executor: executor{d: e.d, db: tx, claim: tx}, tx: tx, owned: true}, nil
}

// Exec runs raw SQL. Without args pgx uses the simple protocol, so a
// migration file with many statements runs as one call.
func (e *executor) Exec(ctx context.Context, sql string, args ...any) error {
	if _, err := e.db.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("keelpgx: exec: %w", err)
	}
	return nil
}

// executorTx is an executor inside a pgx.Tx. owned is false for a caller's
// transaction wrapped by UnwrapExecutor: the caller commits it.
type executorTx struct {
	executor
	tx    pgx.Tx
	owned bool
}

var _ keeldriver.ExecutorTx = (*executorTx)(nil)

func (t *executorTx) Commit(ctx context.Context) error {
	if !t.owned {
		return nil
	}
	if err := t.tx.Commit(ctx); err != nil {
		return fmt.Errorf("keelpgx: committing: %w", err)
	}
	return nil
}

// Rollback after Commit is a no-op so that `defer tx.Rollback(ctx)` is safe.
func (t *executorTx) Rollback(ctx context.Context) error {
	if !t.owned {
		return nil
	}
	if err := t.tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("keelpgx: rolling back: %w", err)
	}
	return nil
}

// poolDB is the driver's pool (or, with claims set, its claim pool),
// refusing work after Close with ErrClosed rather than pgx's generic
// closed-pool error.
type poolDB struct {
	d      *Driver
	claims bool
}

func (p poolDB) pool() *pgxpool.Pool {
	if p.claims {
		return p.d.claims
	}
	return p.d.pool
}

func (p poolDB) Begin(ctx context.Context) (pgx.Tx, error) {
	if p.d.closed.Load() {
		return nil, keeldriver.ErrClosed
	}
	return p.pool().Begin(ctx)
}

func (p poolDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if p.d.closed.Load() {
		return pgconn.CommandTag{}, keeldriver.ErrClosed
	}
	return p.pool().Exec(ctx, sql, args...)
}

func (p poolDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if p.d.closed.Load() {
		return nil, keeldriver.ErrClosed
	}
	return p.pool().Query(ctx, sql, args...)
}

func (p poolDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if p.d.closed.Load() {
		return errRow{keeldriver.ErrClosed}
	}
	return p.pool().QueryRow(ctx, sql, args...)
}

// SendBatch is not guarded here: pgx.BatchResults has no error-only form,
// so callers check Driver.closed before batching.
func (p poolDB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return p.pool().SendBatch(ctx, b)
}

func (p poolDB) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if p.d.closed.Load() {
		return 0, keeldriver.ErrClosed
	}
	return p.pool().CopyFrom(ctx, table, columns, src)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
