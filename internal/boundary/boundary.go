// Package boundary checks the import rules that keep business modules, the
// server and the engine apart, so that a module written today still builds
// on the engine of next year and a module can be taken out of the binary by
// deleting one registration line:
//
//   - a module (a package under modules/NAME) imports the standard library,
//     third-party libraries, the public engine packages and its own
//     sub-packages, nothing else: not the engine's internal packages, not a
//     driver or the driver seam, not the server, not another module;
//   - the server (server/...) imports no module and no driver: it is given
//     modules and a database by the command that builds it.
//
// Tests of a module may in addition open databases through the engine's
// test helpers and the drivers, and run the module inside the real server;
// they still may not import another module. The rules are checked from `go list -json`, by an
// ordinary test of this package.
package boundary

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// Package is what the rules need of one package.
type Package struct {
	ImportPath   string
	Imports      []string // of its non-test files
	TestImports  []string // of its _test.go files in the package
	XTestImports []string // of its _test.go files in package NAME_test
}

// Violation is one import a rule forbids.
type Violation struct {
	From, To string
	Test     bool   // the import is in a test file
	Rule     string // which rule, in words
}

func (v Violation) String() string {
	where := ""
	if v.Test {
		where = " (in a test)"
	}
	return fmt.Sprintf("%s imports %s%s: %s", v.From, v.To, where, v.Rule)
}

// List runs `go list -json` for patterns in dir and returns the packages.
func List(dir string, patterns ...string) ([]Package, error) {
	args := append([]string{"list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports,Error"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing packages in %s: %w: %s", dir, err, stderr.String())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			Package
			Error *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading go list output: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("package %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p.Package)
	}
	return pkgs, nil
}

// Rules are the boundary of one Go module whose path is Root.
type Rules struct {
	Root string // "github.com/keelwork/keel"
}

// Public are the engine packages a module may import (each with its
// sub-packages, except the root itself).
var Public = []string{"", "keeltype", "keelsql", "keelmigrate", "module", "keelevents", "keelrecon"}

// testOnly are what a module's tests may import besides: the engine's test
// databases and browser, the drivers they open, the driver seam they pass,
// and the server, which end-to-end tests run the module inside as `keel
// serve` does. (Plans are checked through moduletest.RequireKeyLookups.)
var testOnly = []string{"internal/testdb", "internal/browsertest", "keelpgx", "keelsqlite", "keeldriver", "server"}

// drivers are the packages the server may not import.
var drivers = []string{"keelpgx", "keelsqlite"}

// Check returns every import of pkgs that the rules forbid, sorted.
func (r Rules) Check(pkgs []Package) []Violation {
	var out []Violation
	for _, p := range pkgs {
		for _, imp := range p.Imports {
			out = append(out, r.check(p.ImportPath, imp, false)...)
		}
		for _, imp := range append(append([]string(nil), p.TestImports...), p.XTestImports...) {
			out = append(out, r.check(p.ImportPath, imp, true)...)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].From != out[j].From {
			return out[i].From < out[j].From
		}
		return out[i].To < out[j].To
	})
	return dedupe(out)
}

func (r Rules) check(from, to string, test bool) []Violation {
	rel, ours := r.rel(to)
	if !ours {
		return nil // the standard library or a third-party library
	}
	fromRel, _ := r.rel(from)
	v := func(rule string) []Violation { return []Violation{{From: from, To: to, Test: test, Rule: rule}} }
	if mod, ok := moduleOf(fromRel); ok {
		if other, isMod := moduleOf(rel); isMod {
			if other == mod {
				return nil
			}
			return v("a module does not import another module")
		}
		if under(rel, "server") && !test {
			return v("a module does not import the server")
		}
		for _, p := range Public {
			if p == "" && rel == "" || p != "" && under(rel, p) {
				return nil
			}
		}
		if test {
			for _, p := range testOnly {
				if under(rel, p) {
					return nil
				}
			}
		}
		return v("a module imports only the public engine packages (" + strings.Join(publicNames(), ", ") + ") and its own sub-packages")
	}
	if under(fromRel, "server") && !test {
		if _, isMod := moduleOf(rel); isMod {
			return v("the server does not import a module")
		}
		for _, d := range drivers {
			if under(rel, d) {
				return v("the server does not import a driver")
			}
		}
	}
	if under(fromRel, "server") && test {
		if _, isMod := moduleOf(rel); isMod {
			return v("the server does not import a module")
		}
	}
	return nil
}

// rel is path relative to the root ("" for the root) and whether it is in
// the root module at all.
func (r Rules) rel(path string) (string, bool) {
	if path == r.Root {
		return "", true
	}
	rest, ok := strings.CutPrefix(path, r.Root+"/")
	return rest, ok
}

// moduleOf names the business module a relative path is in.
func moduleOf(rel string) (string, bool) {
	rest, ok := strings.CutPrefix(rel, "modules/")
	if !ok || rest == "" {
		return "", false
	}
	name, _, _ := strings.Cut(rest, "/")
	return name, true
}

func under(rel, pkg string) bool { return rel == pkg || strings.HasPrefix(rel, pkg+"/") }

func publicNames() []string {
	out := []string{"keel"}
	for _, p := range Public[1:] {
		out = append(out, p+"/...")
	}
	return out
}

func dedupe(vs []Violation) []Violation {
	var out []Violation
	for i, v := range vs {
		if i > 0 && v == vs[i-1] {
			continue
		}
		out = append(out, v)
	}
	return out
}
