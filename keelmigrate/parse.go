package keelmigrate

import (
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// fileRE is the one accepted file name shape: NNN_name.up.sql or
// NNN_name.down.sql. The version may have any zero padding; the name is
// letters, digits, '_' and '-' so that it survives every shell and URL.
var fileRE = regexp.MustCompile(`^([0-9]+)_([A-Za-z0-9_-]+)\.(up|down)\.sql$`)

// lineNameRE restricts line names to what is safe in logs, CLI flags and the
// keel_migration.line column.
var lineNameRE = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,62}$`)

// parseLine reads the migration files at the root of fsys. Every problem is
// reported (joined), each naming the line and the offending file, so that a
// developer fixes them all in one pass.
//
// Rules:
//   - a file ending in .sql must match NNN_name.up.sql / NNN_name.down.sql
//     with NNN a positive integer (any zero padding);
//   - a version appears once per direction, and its up and down files carry
//     the same name (001_a.up.sql with 001_b.down.sql is a mistake);
//   - every version has an up file; a down file is optional (such a
//     migration is irreversible and Down refuses it);
//   - gaps between versions are allowed.
//
// Directories and files not ending in .sql (README.md, ...) are ignored.
func parseLine(line string, fsys fs.FS) ([]*Migration, error) {
	if fsys == nil {
		return nil, fmt.Errorf("keelmigrate: line %q: FS is nil", line)
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("keelmigrate: line %q: listing migrations: %w", line, err)
	}

	type pair struct {
		up, down         string // file names
		upName, downName string
		upSQL, downSQL   string
	}
	byVersion := map[int]*pair{}
	var errs []error
	bad := func(file, format string, args ...any) {
		errs = append(errs, fmt.Errorf("keelmigrate: line %q: %s: %s", line, file, fmt.Sprintf(format, args...)))
	}

	for _, e := range entries {
		file := e.Name()
		if e.IsDir() || !strings.HasSuffix(strings.ToLower(file), ".sql") {
			continue
		}
		m := fileRE.FindStringSubmatch(file)
		if m == nil {
			bad(file, "bad migration file name: want NNN_name.up.sql or NNN_name.down.sql "+
				"(NNN a positive number, name of letters, digits, '_' or '-')")
			continue
		}
		version, err := strconv.Atoi(m[1])
		if err != nil || version <= 0 {
			bad(file, "bad migration version %q: must be a positive integer", m[1])
			continue
		}
		name, dir := m[2], m[3]
		src, err := fs.ReadFile(fsys, file)
		if err != nil {
			bad(file, "reading: %v", err)
			continue
		}
		p := byVersion[version]
		if p == nil {
			p = &pair{}
			byVersion[version] = p
		}
		if dir == "up" {
			if p.up != "" {
				bad(file, "duplicate version %d: %s has the same version", version, p.up)
				continue
			}
			p.up, p.upName, p.upSQL = file, name, string(src)
		} else {
			if p.down != "" {
				bad(file, "duplicate version %d: %s has the same version", version, p.down)
				continue
			}
			p.down, p.downName, p.downSQL = file, name, string(src)
		}
	}

	versions := make([]int, 0, len(byVersion))
	for v := range byVersion {
		versions = append(versions, v)
	}
	sort.Ints(versions)
	migrations := make([]*Migration, 0, len(versions))
	for _, v := range versions {
		p := byVersion[v]
		switch {
		case p.up == "":
			bad(p.down, "down migration without an up file (want %s)", strings.TrimSuffix(p.down, ".down.sql")+".up.sql")
			continue
		case p.down != "" && p.downName != p.upName:
			bad(p.down, "name does not match its up file %s (duplicate version %d?)", p.up, v)
			continue
		case strings.TrimSpace(p.upSQL) == "":
			bad(p.up, "file is empty")
			continue
		}
		migrations = append(migrations, &Migration{
			Line:     line,
			Version:  v,
			Name:     p.upName,
			UpFile:   p.up,
			DownFile: p.down,
			upSQL:    p.upSQL,
			downSQL:  p.downSQL,
		})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return migrations, nil
}
