package testdb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelsqlite"
)

// SQLite test files are copied from a template migrated once per test
// process and set of migration lines, not migrated one by one: under -race
// the migrations of a module's tables cost a test about 170 ms of a core
// (modernc's SQLite is C compiled to Go, and the detector instruments all
// of it), a copy about a millisecond, and the suite opens a file for
// every SQLite test. The copy is the migrated database byte for byte, so a
// test cannot tell it from one it migrated itself; PostgreSQL schemas are
// still migrated each time (there is no cheap copy of a schema).

// sqliteTemplates holds, per migration set, the bytes of a migrated file.
var sqliteTemplates sync.Map // key -> *sqliteTemplate

type sqliteTemplate struct {
	once  sync.Once
	bytes []byte
	err   error
}

// migratedSQLite writes a migrated database for opts to path.
func migratedSQLite(ctx context.Context, t testing.TB, path string, opts *Options) error {
	t.Helper()
	var lines []keelmigrate.Line
	if opts.Lines != nil {
		lines = opts.Lines("sqlite")
	}
	key, err := linesKey(lines)
	if err != nil {
		return err
	}
	v, _ := sqliteTemplates.LoadOrStore(key, &sqliteTemplate{})
	tp := v.(*sqliteTemplate)
	tp.once.Do(func() { tp.bytes, tp.err = buildSQLiteTemplate(ctx, lines) })
	if tp.err != nil {
		return tp.err
	}
	return os.WriteFile(path, tp.bytes, 0o600)
}

// linesKey identifies a migration set by its lines' names and files.
func linesKey(lines []keelmigrate.Line) (string, error) {
	h := sha256.New()
	for _, l := range lines {
		fmt.Fprintf(h, "line %q\n", l.Name)
		if l.FS == nil {
			continue
		}
		err := fs.WalkDir(l.FS, ".", func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			b, err := fs.ReadFile(l.FS, p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "file %q %d\n", p, len(b))
			h.Write(b)
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("testdb: reading line %s: %w", l.Name, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// buildSQLiteTemplate migrates a file in a directory of its own and reads
// it back once the driver closed it (so the write-ahead log is folded into
// the file and nothing else is needed to copy it).
func buildSQLiteTemplate(ctx context.Context, lines []keelmigrate.Line) ([]byte, error) {
	dir, err := os.MkdirTemp("", "keel-testdb-template-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "keel.db")
	d, err := keelsqlite.Open(path, nil)
	if err != nil {
		return nil, fmt.Errorf("testdb: opening the SQLite template: %w", err)
	}
	m, err := keelmigrate.New(d, &keelmigrate.Config{Lines: lines})
	if err == nil {
		_, err = m.Up(ctx, nil)
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("testdb: migrating the SQLite template: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Name() != "keel.db" {
			if fi, err := e.Info(); err == nil && fi.Size() > 0 && strings.HasSuffix(e.Name(), "-wal") {
				return nil, fmt.Errorf("testdb: the SQLite template left a write-ahead log %s of %d bytes after close", e.Name(), fi.Size())
			}
		}
	}
	return os.ReadFile(path)
}

// templateBuildTimeout bounds building one template.
const templateBuildTimeout = 2 * time.Minute
