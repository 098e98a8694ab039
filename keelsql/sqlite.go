package keelsql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// SQLite adapts a database/sql handle on SQLite (keelsqlite.Driver.DB) to
// DB, converting times to and from INTEGER unix microseconds.
func SQLite(db *sql.DB) DB[*sql.Tx] { return &sqlDB{sqlQ{db}, db} }

type sqlRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type sqlQ struct{ r sqlRunner }

func (q sqlQ) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.r.ExecContext(ctx, query, sqliteArgs(args)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q sqlQ) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	rows, err := q.r.QueryContext(ctx, query, sqliteArgs(args)...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (q sqlQ) QueryRow(ctx context.Context, query string, args ...any) Row {
	return sqlRow{q.r.QueryRowContext(ctx, query, sqliteArgs(args)...)}
}

type sqlRows struct{ rows *sql.Rows }

func (r sqlRows) Next() bool { return r.rows.Next() }
func (r sqlRows) Err() error { return r.rows.Err() }
func (r sqlRows) Close()     { _ = r.rows.Close() }
func (r sqlRows) Scan(dest ...any) error {
	return scanTimes(r.rows.Scan, dest)
}

type sqlRow struct{ row *sql.Row }

func (r sqlRow) Scan(dest ...any) error {
	err := scanTimes(r.row.Scan, dest)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNoRows
	}
	return err
}

type sqlDB struct {
	sqlQ
	db *sql.DB
}

func (d *sqlDB) Dialect() string { return "sqlite" }

func (d *sqlDB) InTx(ctx context.Context, f func(tx Tx[*sql.Tx]) error) (err error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("keelsql: begin: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback()
			panic(p)
		}
	}()
	if err := f(&sqlTx{sqlQ{tx}, tx}); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

type sqlTx struct {
	sqlQ
	tx *sql.Tx
}

func (t *sqlTx) Native() *sql.Tx { return t.tx }

// sqliteArgs stores times as unix microseconds (UTC) and Arrays as JSON text.
func sqliteArgs(args []any) []any {
	out := args
	for i, a := range args {
		var v any
		switch t := a.(type) {
		case Array:
			v = t.sqlite
			if v == "" {
				v = "[]"
			}
		case *Array:
			v = "[]"
			if t != nil && t.sqlite != "" {
				v = t.sqlite
			}
		case time.Time:
			v = t.UnixMicro()
		case *time.Time:
			if t != nil {
				v = t.UnixMicro()
			}
		default:
			continue
		}
		if &out[0] == &args[0] {
			out = append([]any(nil), args...)
		}
		out[i] = v
	}
	return out
}

// scanTimes scans INTEGER microseconds into *time.Time and **time.Time
// destinations; every other destination is scanned as given.
func scanTimes(scan func(...any) error, dest []any) error {
	var fix []func()
	d := dest
	for i, x := range dest {
		switch t := x.(type) {
		case *time.Time:
			var n sql.NullInt64
			if len(fix) == 0 {
				d = append([]any(nil), dest...)
			}
			d[i] = &n
			fix = append(fix, func() {
				if n.Valid {
					*t = time.UnixMicro(n.Int64).UTC()
				} else {
					*t = time.Time{}
				}
			})
		case **time.Time:
			var n sql.NullInt64
			if len(fix) == 0 {
				d = append([]any(nil), dest...)
			}
			d[i] = &n
			fix = append(fix, func() {
				if n.Valid {
					v := time.UnixMicro(n.Int64).UTC()
					*t = &v
				} else {
					*t = nil
				}
			})
		}
	}
	if err := scan(d...); err != nil {
		return err
	}
	for _, f := range fix {
		f()
	}
	return nil
}
