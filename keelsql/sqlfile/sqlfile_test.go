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

func TestLoadIncludes(t *testing.T) {
	fsys := fstest.MapFS{
		"q/a.sql": {Data: []byte("-- name: Filter\nFROM t\nWHERE x = $1\n\n-- name: Count\nSELECT count(*)\n-- include: Filter\n;")},
		"q/b.sql": {Data: []byte("-- name: List\nSELECT *\n  -- include: Filter\nORDER BY id;")},
	}
	set, err := Load(fsys, "q")
	if err != nil {
		t.Fatal(err)
	}
	if set["Count"] != "SELECT count(*)\nFROM t\nWHERE x = $1" || set["List"] != "SELECT *\nFROM t\nWHERE x = $1\nORDER BY id" {
		t.Fatalf("not expanded: %#v", set)
	}
	for name, src := range map[string]string{
		"unknown": "-- name: A\nSELECT 1\n-- include: Missing\n;",
		"nested":  "-- name: F\nFROM t\n-- name: G\n-- include: F\n-- name: A\nSELECT 1\n-- include: G\n;",
	} {
		if _, err := Load(fstest.MapFS{"q/a.sql": {Data: []byte(src)}}, "q"); err == nil {
			t.Errorf("%s include: expected an error", name)
		}
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
