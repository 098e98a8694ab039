package reservation

import (
	"embed"

	"github.com/keelwork/keel/keelmigrate"
)

// LineName names the module's migration line.
const LineName = "reservation"

//go:embed migrations/postgres/*.sql migrations/sqlite/*.sql
var migrationFiles embed.FS

//go:embed queries/postgres/*.sql queries/sqlite/*.sql
var queryFiles embed.FS

// Line returns the module's migration line for a dialect.
func Line(dialect string) (keelmigrate.Line, error) {
	return keelmigrate.DialectLine(LineName, migrationFiles, "migrations", dialect)
}

// Lines is Line as a list (testdb.Options.Lines' shape); an unknown dialect
// yields none.
func Lines(dialect string) []keelmigrate.Line {
	return keelmigrate.DialectLines(LineName, migrationFiles, "migrations", dialect)
}
