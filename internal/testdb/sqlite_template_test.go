package testdb_test

import (
	"context"
	"database/sql"
	"testing"
	"testing/fstest"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelmigrate"
)

// TestSQLiteFilesFromTemplate: files copied from the migrated template are
// migrated (the engine and the module lines asked for, and only those),
// and each test's file is its own: a write to one is not in another.
func TestSQLiteFilesFromTemplate(t *testing.T) {
	ctx := context.Background()
	note := fstest.MapFS{"001_note.up.sql": {Data: []byte("CREATE TABLE note (id INTEGER PRIMARY KEY, body TEXT NOT NULL);")},
		"001_note.down.sql": {Data: []byte("DROP TABLE note;")}}
	lines := func(string) []keelmigrate.Line { return []keelmigrate.Line{{Name: "notes", FS: note}} }
	a, _ := testdb.OpenSQLite(t, &testdb.Options{Lines: lines})
	b, _ := testdb.OpenSQLite(t, &testdb.Options{Lines: lines})
	plain := testdb.NewSQLite(t)
	for name, ok := range map[string]bool{
		"a keel_job": has(t, a.DB(), "keel_job"), "a note": has(t, a.DB(), "note"),
		"b note": has(t, b.DB(), "note"), "plain keel_job": has(t, plain.DB(), "keel_job"),
	} {
		if !ok {
			t.Fatalf("%s: missing", name)
		}
	}
	if has(t, plain.DB(), "note") {
		t.Fatal("a file without the notes line has its table: templates were mixed up")
	}
	if _, err := a.DB().ExecContext(ctx, "INSERT INTO note (body) VALUES ('only in a')"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.DB().QueryRowContext(ctx, "SELECT count(*) FROM note").Scan(&n); err != nil || n != 0 {
		t.Fatalf("b sees %d notes (%v): the files are shared", n, err)
	}
	var lines2 int
	if err := a.DB().QueryRowContext(ctx, "SELECT count(DISTINCT line) FROM keel_migration").Scan(&lines2); err != nil || lines2 != 2 {
		t.Fatalf("keel_migration names %d lines (%v), want the engine and notes", lines2, err)
	}
}

// has reports whether the SQLite database has the table.
func has(t *testing.T, db *sql.DB, table string) bool {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}
