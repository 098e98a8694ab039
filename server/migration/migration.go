// Package migration holds the server's migration line ("server"): the API
// token and console session tables, one FS per dialect.
package migration

import (
	"embed"
	"fmt"
	"io/fs"

	"github.com/keelwork/keel/keelmigrate"
)

// LineName names the server's line in keel_migration.
const LineName = "server"

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Line returns the server line for a dialect ("postgres" or "sqlite").
func Line(dialect string) (keelmigrate.Line, error) {
	if dialect != "postgres" && dialect != "sqlite" {
		return keelmigrate.Line{}, fmt.Errorf("server migrations: unknown dialect %q", dialect)
	}
	sub, err := fs.Sub(files, dialect)
	if err != nil {
		return keelmigrate.Line{}, err
	}
	return keelmigrate.Line{Name: LineName, FS: sub}, nil
}

// Lines is Line as a list, in the shape testdb.Options.Lines and
// keelmigrate.Config.Lines take; an unknown dialect yields none.
func Lines(dialect string) []keelmigrate.Line {
	l, err := Line(dialect)
	if err != nil {
		return nil
	}
	return []keelmigrate.Line{l}
}
