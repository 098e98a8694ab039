package reservation

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// statementCalls are the calls that run a statement, with their least
// number of arguments: the keelsql Querier's methods (a context and the
// statement; a URL's Query() takes none) and the store's lookup of a
// statement by name.
var statementCalls = map[string]int{"Query": 2, "QueryRow": 2, "Exec": 2, "sql": 1}

// statementsOutsideStore lists the calls in dir's production files, other
// than store.go and store_*.go, that run a statement.
func statementsOutsideStore(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var out []string
	for _, path := range files {
		name := filepath.Base(path)
		if strings.HasSuffix(name, "_test.go") || name == "store.go" || strings.HasPrefix(name, "store_") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return nil, err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if least, ok := statementCalls[sel.Sel.Name]; ok && len(call.Args) >= least {
				out = append(out, fmt.Sprintf("%s: %s", fset.Position(call.Pos()), sel.Sel.Name))
			}
			return true
		})
	}
	return out, nil
}

// TestStatementsOnlyInStore keeps the module's layout: every statement runs
// in the store, the other layers call its typed methods.
func TestStatementsOnlyInStore(t *testing.T) {
	t.Parallel()
	calls, err := statementsOutsideStore(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		t.Errorf("statement outside the store: %s", c)
	}
}

// The check finds a statement in a domain file and none in a store file.
func TestStatementsOnlyInStoreCatchesACrossing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("package x\n\n"+body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("store_x.go", `func (s *store) get(ctx any) { s.db.QueryRow(ctx, s.sql("XGet")) }`)
	write("domain_x.go", `func (m *Module) cancel(ctx any, tx querier, r *http.Request) { _ = r.URL.Query(); tx.Exec(ctx, "UPDATE x SET y = 1") }`)
	write("domain_x_test.go", `func helper(tx querier) { tx.Exec(nil, "DELETE FROM x") }`)
	calls, err := statementsOutsideStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || !strings.Contains(calls[0], "domain_x.go") || !strings.HasSuffix(calls[0], "Exec") {
		t.Fatalf("crossings found: %q, want the one Exec in domain_x.go", calls)
	}
}
