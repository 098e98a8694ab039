package keelrecon

import (
	"embed"

	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelsql/sqlfile"
)

// LineName names the reconciliation migration line.
const LineName = "recon"

//go:embed migrations/postgres/*.sql migrations/sqlite/*.sql
var migrationFiles embed.FS

//go:embed queries/postgres/*.sql queries/sqlite/*.sql
var queryFiles embed.FS

// Line returns the line for a dialect ("postgres", "sqlite").
func Line(dialect string) (keelmigrate.Line, error) {
	return keelmigrate.DialectLine(LineName, migrationFiles, "migrations", dialect)
}

// Lines is Line as a list; an unknown dialect yields none.
func Lines(dialect string) []keelmigrate.Line {
	return keelmigrate.DialectLines(LineName, migrationFiles, "migrations", dialect)
}

var queries = map[string]sqlfile.Set{
	"postgres": sqlfile.MustLoad(queryFiles, "queries/postgres"),
	"sqlite":   sqlfile.MustLoad(queryFiles, "queries/sqlite"),
}
