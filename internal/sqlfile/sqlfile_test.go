package sqlfile

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestParse(t *testing.T) {
	set, err := Parse("q.sql", "-- leading comment\n-- name: A\nSELECT 1;\n\n-- name: B\n-- why\nSELECT 2\nFROM t;\n")
	if err != nil {
		t.Fatal(err)
	}
	if set["A"] != "SELECT 1" || set["B"] != "-- why\nSELECT 2\nFROM t" {
		t.Fatalf("unexpected set: %#v", set)
	}
}

func TestParseErrors(t *testing.T) {
	for name, src := range map[string]string{
		"sql before marker": "SELECT 1;\n-- name: A\nSELECT 2;",
		"empty body":        "-- name: A\n-- only a comment\n",
		"duplicate":         "-- name: A\nSELECT 1;\n-- name: A\nSELECT 2;",
		"empty name":        "-- name:   \nSELECT 1;",
		"name with space":   "-- name: A B\nSELECT 1;",
	} {
		if _, err := Parse("x.sql", src); err == nil {
			t.Errorf("%s: expected an error", name)
		}
	}
}

func TestLoadRejectsCrossFileDuplicates(t *testing.T) {
	fsys := fstest.MapFS{
		"q/a.sql": {Data: []byte("-- name: A\nSELECT 1;")},
		"q/b.sql": {Data: []byte("-- name: A\nSELECT 2;")},
	}
	if _, err := Load(fsys, "q"); err == nil || !strings.Contains(err.Error(), "two files") {
		t.Fatalf("expected duplicate error, got %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("-- name: A\nSELECT 1;\n-- name: B\nSELECT 2;")
	f.Add("SELECT 1")
	f.Add("-- name:\n")
	f.Add("-- name:0\n;")
	f.Fuzz(func(t *testing.T, src string) {
		set, err := Parse("fuzz.sql", src)
		if err != nil {
			return
		}
		for name, body := range set {
			if name == "" || strings.Trim(stripComments(body), " \t\r\n;") == "" {
				t.Fatalf("accepted empty name or body: %q => %q", name, body)
			}
		}
	})
}
