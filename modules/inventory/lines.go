package inventory

import (
	"embed"

	"github.com/keelwork/keel/keelmigrate"
)

// LineName names the module's migration line.
const LineName = "inventory"

//go:embed migrations/postgres/*.sql migrations/sqlite/*.sql
var migrationFiles embed.FS

// Line returns the module's migration line for a dialect.
func Line(dialect string) (keelmigrate.Line, error) {
	return keelmigrate.DialectLine(LineName, migrationFiles, "migrations", dialect)
}

// Lines is Line as a list; an unknown dialect yields none.
func Lines(dialect string) []keelmigrate.Line {
	return keelmigrate.DialectLines(LineName, migrationFiles, "migrations", dialect)
}
