package tracking

import (
	"embed"
	"fmt"
	"io/fs"

	"github.com/keelwork/keel/keelmigrate"
)

// Name is the module's name and its migration line's.
const Name = "tracking"

//go:embed migrations/postgres/*.sql migrations/sqlite/*.sql
var migrationFiles embed.FS

// Line returns the module's migration line for a dialect.
func Line(dialect string) (keelmigrate.Line, error) {
	if dialect != "postgres" && dialect != "sqlite" {
		return keelmigrate.Line{}, fmt.Errorf("tracking migrations: unknown dialect %q", dialect)
	}
	sub, err := fs.Sub(migrationFiles, "migrations/"+dialect)
	if err != nil {
		return keelmigrate.Line{}, err
	}
	return keelmigrate.Line{Name: Name, FS: sub}, nil
}

// Lines is Line as a list; an unknown dialect yields none.
func Lines(dialect string) []keelmigrate.Line {
	l, err := Line(dialect)
	if err != nil {
		return nil
	}
	return []keelmigrate.Line{l}
}
