package payment

import (
	"embed"

	"github.com/keelwork/keel/keelmigrate"
)

// LineName names the module's migration line.
const LineName = "payment"

//go:embed migrations/postgres/*.sql migrations/sqlite/*.sql
var migrationFiles embed.FS

//go:embed queries/postgres/*.sql queries/sqlite/*.sql
var queryFiles embed.FS

// Lines is the module's migration line for a dialect; an unknown dialect
// yields none.
func Lines(dialect string) []keelmigrate.Line {
	return keelmigrate.DialectLines(LineName, migrationFiles, "migrations", dialect)
}
