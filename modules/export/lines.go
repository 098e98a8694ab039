package export

import (
	"embed"

	"github.com/keelwork/keel/keelmigrate"
)

// Name is the module's name: its migration line, settings prefix and routes.
const Name = "export"

//go:embed migrations
var migrationFiles embed.FS

//go:embed queries
var queryFiles embed.FS

// Lines are the module's migration lines for a dialect.
func Lines(dialect string) []keelmigrate.Line {
	return keelmigrate.DialectLines(Name, migrationFiles, "migrations", dialect)
}
