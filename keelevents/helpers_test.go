package keelevents_test

import (
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelsql"
)

func lines(dialect string) []keelmigrate.Line { return []keelmigrate.Line{keelevents.Line(dialect)} }

// pgDB and liteDB return a fresh migrated database of each kind.
func pgDB(t testing.TB) keelsql.DB[pgx.Tx] {
	d, _ := testdb.OpenPostgres(t, &testdb.Options{Lines: lines})
	return keelsql.Pgx(d.Pool())
}

func liteDB(t testing.TB) keelsql.DB[*sql.Tx] {
	d, _ := testdb.OpenSQLite(t, &testdb.Options{Lines: lines})
	return keelsql.SQLite(d.DB())
}

// both runs f on PostgreSQL and SQLite.
func both(t *testing.T, pg func(t *testing.T, db keelsql.DB[pgx.Tx]), lite func(t *testing.T, db keelsql.DB[*sql.Tx])) {
	t.Run("postgres", func(t *testing.T) { t.Parallel(); pg(t, pgDB(t)) })
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); lite(t, liteDB(t)) })
}
