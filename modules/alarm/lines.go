package alarm

import (
	"embed"

	"github.com/keelwork/keel/keelmigrate"
)

// Name is the module's name and its migration line's.
const Name = "alarm"

//go:embed migrations/postgres/*.sql migrations/sqlite/*.sql
var migrationFiles embed.FS

//go:embed queries/postgres/*.sql queries/sqlite/*.sql
var queryFiles embed.FS

// Lines is the module's migration line for a dialect; an unknown dialect
// yields none.
func Lines(dialect string) []keelmigrate.Line {
	return keelmigrate.DialectLines(Name, migrationFiles, "migrations", dialect)
}
