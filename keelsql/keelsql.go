// Package keelsql gives modules one way to run their own SQL on whichever
// database the engine runs on, inside transactions whose native form
// (pgx.Tx, *sql.Tx) the engine's InsertTx and CompleteTx accept. A module is
// written once, generic over TTx; only its .sql files differ per dialect
// (PostgreSQL numbers parameters $1, SQLite ?1).
//
// Written by hand because pgx and database/sql differ in exactly the places
// a module touches (rows, no-rows errors, time values) and no library
// bridges them while keeping pgx's native transaction for the engine.
//
// Times: pass time.Time (or *time.Time, nil for NULL) as arguments and scan
// into *time.Time (or **time.Time for nullable columns) on both dialects.
// On SQLite they are stored as INTEGER unix microseconds (UTC), the same
// convention as the engine's own tables, so that comparisons and indexes
// are exact.
package keelsql

import (
	"context"
	"errors"
)

// ErrNoRows is returned by Row.Scan when the query matched nothing, on
// both dialects.
var ErrNoRows = errors.New("keelsql: no rows")

// Querier runs statements.
type Querier interface {
	// Exec runs a statement and returns the rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// Query runs a statement returning rows; callers Close them.
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	// QueryRow runs a statement expected to return at most one row.
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Rows is a result set.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Row is a single-row result; Scan returns ErrNoRows when there is none.
type Row interface {
	Scan(dest ...any) error
}

// Tx is a transaction in progress. Native is the driver's own transaction,
// to pass to keel.Client.InsertTx / CompleteTx so that engine statements
// commit or roll back with the module's.
type Tx[TTx any] interface {
	Querier
	Native() TTx
}

// DB is a module's handle on the database.
type DB[TTx any] interface {
	Querier
	// InTx runs f in a transaction, committing when f returns nil and
	// rolling back otherwise (and on panic).
	InTx(ctx context.Context, f func(tx Tx[TTx]) error) error
	// Dialect is "postgres" or "sqlite".
	Dialect() string
}

// CollectRows scans every row with scan and closes rows.
func CollectRows[T any](rows Rows, err error, scan func(Rows) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
