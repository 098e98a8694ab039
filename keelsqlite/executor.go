package keelsqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/keelwork/keel/keeldriver"
)

// dbtx is what *sql.DB and *sql.Tx have in common.
type dbtx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// executor is the pool executor (tx == nil), a transaction this package
// began (owned), a savepoint inside one (savepoint != ""), or a caller's
// transaction (none of those: Commit/Rollback are no-ops).
type executor struct {
	d         *Driver
	tx        *sql.Tx
	owned     bool
	savepoint string
	done      bool // savepoint released or rolled back
}

var (
	_ keeldriver.Executor   = (*executor)(nil)
	_ keeldriver.ExecutorTx = (*executor)(nil)
)

// savepointSeq names nested savepoints; names are never user input.
var savepointSeq atomic.Uint64

// Begin starts a write transaction on the pool (BEGIN IMMEDIATE, so it never
// fails later upgrading a read lock), or a savepoint inside a transaction.
func (e *executor) Begin(ctx context.Context) (keeldriver.ExecutorTx, error) {
	if e.tx == nil {
		if e.d.closed.Load() {
			return nil, keeldriver.ErrClosed
		}
		tx, err := e.d.w.BeginTx(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("keelsqlite: beginning transaction: %w", err)
		}
		return &executor{d: e.d, tx: tx, owned: true}, nil
	}
	name := fmt.Sprintf("keel_sp_%d", savepointSeq.Add(1))
	if _, err := e.tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return nil, fmt.Errorf("keelsqlite: beginning savepoint: %w", err)
	}
	return &executor{d: e.d, tx: e.tx, savepoint: name}, nil
}

// Commit commits an owned transaction or releases a savepoint; on a caller's
// transaction it does nothing.
func (e *executor) Commit(ctx context.Context) error {
	switch {
	case e.owned:
		if err := e.tx.Commit(); err != nil {
			return fmt.Errorf("keelsqlite: committing: %w", err)
		}
	case e.savepoint != "" && !e.done:
		e.done = true
		if _, err := e.tx.ExecContext(ctx, "RELEASE "+e.savepoint); err != nil {
			return fmt.Errorf("keelsqlite: releasing savepoint: %w", err)
		}
	}
	return nil
}

// Rollback rolls back an owned transaction or a savepoint. It is safe after
// Commit (a no-op then), so callers can defer it.
func (e *executor) Rollback(ctx context.Context) error {
	switch {
	case e.owned:
		if err := e.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			return fmt.Errorf("keelsqlite: rolling back: %w", err)
		}
	case e.savepoint != "" && !e.done:
		e.done = true
		if err := rollbackSavepoint(ctx, e.tx, e.savepoint); err != nil {
			return fmt.Errorf("keelsqlite: rolling back savepoint: %w", err)
		}
	}
	return nil
}

// rollbackSavepoint undoes and then pops a savepoint (ROLLBACK TO keeps it on
// the stack).
func rollbackSavepoint(ctx context.Context, tx *sql.Tx, name string) error {
	if _, err := tx.ExecContext(ctx, "ROLLBACK TO "+name); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, "RELEASE "+name)
	return err
}

// Exec runs raw SQL (possibly several statements) on the writer.
func (e *executor) Exec(ctx context.Context, query string, args ...any) error {
	q, err := e.writer()
	if err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, query, args...); err != nil {
		return fmt.Errorf("keelsqlite: exec: %w", err)
	}
	return nil
}

// writer is where a single write statement runs without its own transaction.
func (e *executor) writer() (dbtx, error) {
	if e.tx != nil {
		return e.tx, nil
	}
	if e.d.closed.Load() {
		return nil, keeldriver.ErrClosed
	}
	return e.d.w, nil
}

// reader is where lookups run: the transaction (to see its own writes) or the
// read pool, which WAL lets run beside the writer.
func (e *executor) reader() (dbtx, error) {
	if e.tx != nil {
		return e.tx, nil
	}
	if e.d.closed.Load() {
		return nil, keeldriver.ErrClosed
	}
	return e.d.r, nil
}

// write runs fn atomically: in its own immediate transaction on the pool, or
// under a savepoint inside a transaction, so a failing batch leaves nothing
// half-done in the caller's transaction either. what names the operation in
// the error.
func (e *executor) write(ctx context.Context, what string, fn func(q dbtx) error) error {
	if err := e.writeTx(ctx, fn); err != nil {
		return fmt.Errorf("keelsqlite: %s: %w", what, err)
	}
	return nil
}

func (e *executor) writeTx(ctx context.Context, fn func(q dbtx) error) error {
	if e.tx != nil {
		return inSavepoint(ctx, e.tx, fn)
	}
	if e.d.closed.Load() {
		return keeldriver.ErrClosed
	}
	tx, err := e.d.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// inSavepoint uses a fixed name: operations never nest, and SQLite resolves
// a repeated name to the innermost savepoint anyway.
func inSavepoint(ctx context.Context, tx *sql.Tx, fn func(q dbtx) error) error {
	const name = "keel_op"
	if _, err := tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		if rbErr := rollbackSavepoint(ctx, tx, name); rbErr != nil {
			return errors.Join(err, rbErr)
		}
		return err
	}
	_, err := tx.ExecContext(ctx, "RELEASE "+name)
	return err
}

// read runs fn on the reader; snapshot asks for one read transaction so that
// several statements see the same state.
func (e *executor) read(ctx context.Context, what string, snapshot bool, fn func(q dbtx) error) error {
	if err := e.readTx(ctx, snapshot, fn); err != nil {
		return fmt.Errorf("keelsqlite: %s: %w", what, err)
	}
	return nil
}

func (e *executor) readTx(ctx context.Context, snapshot bool, fn func(q dbtx) error) error {
	q, err := e.reader()
	if err != nil {
		return err
	}
	if e.tx != nil || !snapshot {
		return fn(q)
	}
	// ReadOnly makes modernc issue a plain (deferred) BEGIN, even when the
	// pool is a caller's DB opened with _txlock=immediate.
	tx, err := e.d.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	return fn(tx)
}
