package keelpgx_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeldrivertest"
	"github.com/keelwork/keel/keelpgx"
)

// TestConformance runs the storage seam's conformance suite on PostgreSQL,
// each subtest in its own schema.
func TestConformance(t *testing.T) {
	keeldrivertest.Run(t, keeldrivertest.Harness[pgx.Tx]{
		Open: func(t *testing.T) keeldriver.Driver[pgx.Tx] { return testdb.NewPostgres(t) },
		BeginTx: func(ctx context.Context, d keeldriver.Driver[pgx.Tx]) (pgx.Tx, error) {
			return d.(*keelpgx.Driver).Pool().Begin(ctx)
		},
		EndTx: func(ctx context.Context, tx pgx.Tx, commit bool) error {
			if commit {
				return tx.Commit(ctx)
			}
			return tx.Rollback(ctx)
		},
		QueryRow: func(ctx context.Context, d keeldriver.Driver[pgx.Tx], query string, dest ...any) error {
			return d.(*keelpgx.Driver).Pool().QueryRow(ctx, query).Scan(dest...)
		},
	})
}
