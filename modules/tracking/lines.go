package tracking

import (
	"embed"

	"github.com/keelwork/keel/keelmigrate"
)

// Name is the module's name and its migration line's.
const Name = "tracking"

//go:embed migrations/postgres/*.sql migrations/sqlite/*.sql
var migrationFiles embed.FS

// Line returns the module's migration line for a dialect.
func Line(dialect string) (keelmigrate.Line, error) {
	return keelmigrate.DialectLine(Name, migrationFiles, "migrations", dialect)
}

// Lines is Line as a list; an unknown dialect yields none.
func Lines(dialect string) []keelmigrate.Line {
	return keelmigrate.DialectLines(Name, migrationFiles, "migrations", dialect)
}
