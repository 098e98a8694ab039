// Package sqlfile loads named SQL statements from embedded .sql files, so
// that SQL lives in .sql files and Go code refers to statements by name.
//
// A file holds statements separated by marker lines:
//
//	-- name: JobClaim
//	UPDATE keel_job SET ...;
//
// A statement may stand in another one's place with a line
//
//	-- include: RecordFilter
//
// which Load replaces with the named statement's text (one level deep), so
// that a rule several statements must apply alike (the delivery records'
// filter: the list, its count, a requeue task's preview and its snapshot)
// is written once and cannot drift between them.
//
// The engine's drivers and the business modules load their statements with
// it alike; a module calls Load from its constructor and returns the error
// (MustLoad is for a driver's package initialisation, where a bad embedded
// file is a build defect its tests catch).
//
// Written by hand because the generator we would otherwise use (sqlc) cannot
// target both pgx and modernc SQLite from one configuration; the format is
// the same one sqlc reads, so moving to it later needs no SQL changes.
package sqlfile

import (
	"bufio"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

const marker = "-- name:"

// Set is a collection of named statements.
type Set map[string]string

// Parse reads the named statements of one file. A statement before the first
// marker, an empty name, a duplicate name or an empty body is an error.
func Parse(file, src string) (Set, error) {
	set := Set{}
	var name string
	var body strings.Builder
	flush := func() error {
		if name == "" {
			if strings.TrimSpace(stripComments(body.String())) != "" {
				return fmt.Errorf("%s: SQL before the first %q marker", file, marker)
			}
			return nil
		}
		text := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(body.String()), ";"))
		if strings.Trim(stripComments(text), " \t\r\n;") == "" {
			return fmt.Errorf("%s: statement %q is empty", file, name)
		}
		if _, dup := set[name]; dup {
			return fmt.Errorf("%s: statement %q defined twice", file, name)
		}
		set[name] = text
		return nil
	}
	sc := bufio.NewScanner(strings.NewReader(src))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), marker); ok {
			if err := flush(); err != nil {
				return nil, err
			}
			name = strings.TrimSpace(rest)
			if name == "" || strings.ContainsAny(name, " \t") {
				return nil, fmt.Errorf("%s: bad statement name %q", file, rest)
			}
			body.Reset()
			continue
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return set, nil
}

// Load parses every *.sql file in dir of fsys into one Set; a name defined in
// two files is an error.
func Load(fsys fs.FS, dir string) (Set, error) {
	files, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	sort.Strings(files)
	all := Set{}
	for _, f := range files {
		src, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		set, err := Parse(f, string(src))
		if err != nil {
			return nil, err
		}
		for k, v := range set {
			if _, dup := all[k]; dup {
				return nil, fmt.Errorf("%s: statement %q defined in two files", f, k)
			}
			all[k] = v
		}
	}
	if err := all.expand(); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return all, nil
}

const includeMarker = "-- include:"

// expand replaces include lines with the statements they name.
func (s Set) expand() error {
	out := make(map[string]string, len(s))
	for name, text := range s {
		if !strings.Contains(text, includeMarker) {
			continue
		}
		lines := strings.Split(text, "\n")
		for i, line := range lines {
			ref, ok := strings.CutPrefix(strings.TrimSpace(line), includeMarker)
			if !ok {
				continue
			}
			ref = strings.TrimSpace(ref)
			part, found := s[ref]
			if !found {
				return fmt.Errorf("statement %q includes %q, which is not defined", name, ref)
			}
			if strings.Contains(part, includeMarker) {
				return fmt.Errorf("statement %q includes %q, which includes another (one level only)", name, ref)
			}
			lines[i] = part
		}
		out[name] = strings.Join(lines, "\n")
	}
	for name, text := range out {
		s[name] = text
	}
	return nil
}

// MustLoad is Load for package initialisation of embedded files, where an
// error is a build defect.
func MustLoad(fsys fs.FS, dir string) Set {
	set, err := Load(fsys, dir)
	if err != nil {
		panic(err)
	}
	return set
}

// Get returns the named statement or panics: names are compile-time
// constants in the drivers, so a miss is a programming error caught by tests.
func (s Set) Get(name string) string {
	q, ok := s[name]
	if !ok {
		panic("sqlfile: no statement named " + name)
	}
	return q
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}
