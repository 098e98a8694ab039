package boundary_test

import (
	"strings"
	"testing"

	"github.com/keelwork/keel/internal/boundary"
)

var rules = boundary.Rules{Root: "github.com/keelwork/keel"}

// TestRepository holds every package of the repository to the boundary.
func TestRepository(t *testing.T) {
	t.Parallel()
	pkgs, err := boundary.List("../..", "./...")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 20 {
		t.Fatalf("listed %d packages, want the whole repository", len(pkgs))
	}
	for _, v := range rules.Check(pkgs) {
		t.Error(v)
	}
}

// TestCrossingImportsFail runs the same check on a small tree whose
// packages cross every boundary, and expects each crossing (and nothing
// else) to be reported.
func TestCrossingImportsFail(t *testing.T) {
	t.Parallel()
	pkgs, err := boundary.List("testdata/crossing", "./...")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range rules.Check(pkgs) {
		got = append(got, v.String())
	}
	const m = "github.com/keelwork/keel/"
	want := []string{
		m + "modules/bad imports " + m + "internal/secret: a module imports only the public engine packages",
		m + "modules/bad imports " + m + "keeldriver: a module imports only the public engine packages",
		m + "modules/bad imports " + m + "modules/other: a module does not import another module",
		m + "modules/bad imports " + m + "modules/other (in a test): a module does not import another module",
		m + "modules/bad imports " + m + "server: a module does not import the server",
		m + "server imports " + m + "keelpgx: the server does not import a driver",
		m + "server imports " + m + "modules/other: the server does not import a module",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d violations, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("violation %d:\n got %s\nwant %s…", i, got[i], want[i])
		}
	}
}
