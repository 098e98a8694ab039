package keelmigrate_test

import (
	"testing"
	"testing/fstest"

	"github.com/keelwork/keel/keelmigrate"
)

func TestDialectLine(t *testing.T) {
	fsys := fstest.MapFS{
		"migrations/postgres/001_x.up.sql": {Data: []byte("SELECT 1;")},
		"migrations/sqlite/001_x.up.sql":   {Data: []byte("SELECT 1;")},
	}
	for _, d := range []string{"postgres", "sqlite"} {
		l, err := keelmigrate.DialectLine("x", fsys, "migrations", d)
		if err != nil || l.Name != "x" {
			t.Fatalf("%s: %+v, %v", d, l, err)
		}
		if _, err := l.FS.Open("001_x.up.sql"); err != nil {
			t.Fatalf("%s: the line's files are not its dialect's: %v", d, err)
		}
	}
	if _, err := keelmigrate.DialectLine("x", fsys, "migrations", "mysql"); err == nil {
		t.Fatal("an unknown dialect was accepted")
	}
	if got := keelmigrate.DialectLines("x", fsys, "migrations", "mysql"); got != nil {
		t.Fatalf("an unknown dialect yields no line, got %v", got)
	}
}
