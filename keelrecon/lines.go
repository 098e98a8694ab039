package keelrecon

import (
	"embed"
	"fmt"
	"io/fs"

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
	if dialect != "postgres" && dialect != "sqlite" {
		return keelmigrate.Line{}, fmt.Errorf("recon migrations: unknown dialect %q", dialect)
	}
	sub, err := fs.Sub(migrationFiles, "migrations/"+dialect)
	if err != nil {
		return keelmigrate.Line{}, err
	}
	return keelmigrate.Line{Name: LineName, FS: sub}, nil
}

// Lines is Line as a list; an unknown dialect yields none.
func Lines(dialect string) []keelmigrate.Line {
	l, err := Line(dialect)
	if err != nil {
		return nil
	}
	return []keelmigrate.Line{l}
}

var queries = map[string]sqlfile.Set{
	"postgres": sqlfile.MustLoad(queryFiles, "queries/postgres"),
	"sqlite":   sqlfile.MustLoad(queryFiles, "queries/sqlite"),
}
