package keelsqlite_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeldrivertest"
	"github.com/keelwork/keel/keelsqlite"
)

// TestConformance runs the storage seam's conformance suite on SQLite, each
// subtest on its own database file.
func TestConformance(t *testing.T) {
	keeldrivertest.Run(t, keeldrivertest.Harness[*sql.Tx]{
		Open: func(t *testing.T) keeldriver.Driver[*sql.Tx] { return testdb.NewSQLite(t) },
		BeginTx: func(ctx context.Context, d keeldriver.Driver[*sql.Tx]) (*sql.Tx, error) {
			return d.(*keelsqlite.Driver).DB().BeginTx(ctx, nil)
		},
		EndTx: func(_ context.Context, tx *sql.Tx, commit bool) error {
			if commit {
				return tx.Commit()
			}
			return tx.Rollback()
		},
		QueryRow: func(ctx context.Context, d keeldriver.Driver[*sql.Tx], query string, dest ...any) error {
			return d.(*keelsqlite.Driver).DB().QueryRowContext(ctx, query).Scan(dest...)
		},
	})
}
