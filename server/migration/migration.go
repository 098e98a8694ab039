// Package migration holds the server's migration line ("server"): the API
// token and console session tables, one FS per dialect.
package migration

import (
	"embed"

	"github.com/keelwork/keel/keelmigrate"
)

// LineName names the server's line in keel_migration.
const LineName = "server"

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Line returns the server line for a dialect ("postgres" or "sqlite").
func Line(dialect string) (keelmigrate.Line, error) {
	return keelmigrate.DialectLine(LineName, files, "", dialect)
}

// Lines is Line as a list, in the shape testdb.Options.Lines and
// keelmigrate.Config.Lines take; an unknown dialect yields none.
func Lines(dialect string) []keelmigrate.Line {
	return keelmigrate.DialectLines(LineName, files, "", dialect)
}
