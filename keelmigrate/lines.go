package keelmigrate

import (
	"fmt"
	"io/fs"
)

// DialectLine is the migration line name whose files for dialect
// ("postgres" or "sqlite") are in fsys under root/<dialect>: the layout
// every line of the engine, the server, the events backbone and the
// modules embeds, so each of them states only its name and its files.
func DialectLine(name string, fsys fs.FS, root, dialect string) (Line, error) {
	if dialect != "postgres" && dialect != "sqlite" {
		return Line{}, fmt.Errorf("%s migrations: unknown dialect %q", name, dialect)
	}
	dir := dialect
	if root != "" && root != "." {
		dir = root + "/" + dialect
	}
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		return Line{}, fmt.Errorf("%s migrations: %w", name, err)
	}
	return Line{Name: name, FS: sub}, nil
}

// DialectLines is DialectLine as a list, in the shape Config.Lines takes;
// an unknown dialect yields none.
func DialectLines(name string, fsys fs.FS, root, dialect string) []Line {
	l, err := DialectLine(name, fsys, root, dialect)
	if err != nil {
		return nil
	}
	return []Line{l}
}
