package keelsql

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pgx adapts a pgx pool (keelpgx.Driver.Pool) to DB.
func Pgx(pool *pgxpool.Pool) DB[pgx.Tx] { return &pgxDB{pgxQ{pool}, pool} }

// pgxRunner is what *pgxpool.Pool and pgx.Tx have in common.
type pgxRunner interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type pgxQ struct{ r pgxRunner }

func (q pgxQ) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := q.r.Exec(ctx, query, pgxArgs(args)...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (q pgxQ) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	rows, err := q.r.Query(ctx, query, pgxArgs(args)...)
	if err != nil {
		return nil, err
	}
	return pgxRows{rows}, nil
}

func (q pgxQ) QueryRow(ctx context.Context, query string, args ...any) Row {
	return pgxRow{q.r.QueryRow(ctx, query, pgxArgs(args)...)}
}

type pgxRows struct{ pgx.Rows }

func (r pgxRows) Close() { r.Rows.Close() }

type pgxRow struct{ row pgx.Row }

func (r pgxRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNoRows
	}
	return err
}

type pgxDB struct {
	pgxQ
	pool *pgxpool.Pool
}

func (d *pgxDB) Dialect() string { return "postgres" }

func (d *pgxDB) InTx(ctx context.Context, f func(tx Tx[pgx.Tx]) error) error {
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		return f(&pgxTx{pgxQ{tx}, tx})
	})
}

type pgxTx struct {
	pgxQ
	tx pgx.Tx
}

func (t *pgxTx) Native() pgx.Tx { return t.tx }
