package cli_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	_ "github.com/keelwork/keel/internal/cli" // every module's words register
	"github.com/keelwork/keel/module/web"
)

// TestEveryAuditActionHasWords reads the source of the engine and of every
// module for the audit actions it can write — each keel.Audit's Action,
// following a variable or a helper's parameter back to the literals given
// it — and checks that each has words in Chinese and in English, so that
// the console's audit log never shows an action's raw name.
func TestEveryAuditActionHasWords(t *testing.T) {
	t.Parallel()
	actions := auditActions(t, filepath.Join("..", ".."))
	if len(actions) < 40 {
		t.Fatalf("found only %d audit actions in the source; the walk misses some: %v", len(actions), actions)
	}
	alarm := 0
	for _, a := range actions {
		if strings.HasPrefix(a, "alarm.") {
			alarm++
		}
	}
	if alarm < 8 {
		t.Errorf("found %d of the alarm module's audit actions; the walk misses its own log", alarm)
	}
	for _, a := range actions {
		w, ok := web.ActionWords(a)
		if !ok {
			t.Errorf("audit action %q has no words (register them with web.RegisterActions in the module's words file)", a)
			continue
		}
		if strings.TrimSpace(w.ZH) == "" || strings.TrimSpace(w.EN) == "" || !hasHan(w.ZH) {
			t.Errorf("audit action %q: words %+v are not in both languages", a, w)
		}
	}
}

func hasHan(s string) bool {
	for _, r := range s {
		if r >= 0x4e00 && r <= 0x9fff {
			return true
		}
	}
	return false
}

var actionShape = regexp.MustCompile(`^[a-z]+(\.[a-z_]+)+$`)

// auditActions walks every non-test Go file under root.
func auditActions(t *testing.T, root string) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs := map[string][]*ast.File{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n != "." && n != ".." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "bench") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		pkgs[dir] = append(pkgs[dir], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for dir, files := range pkgs {
		if filepath.Base(dir) == "alarm" && filepath.Base(filepath.Dir(dir)) == "modules" {
			alarmActions(files, found)
		}
		w := &actionWalk{params: map[string]int{}, found: found}
		for _, f := range files {
			w.file(f)
		}
		// A helper's action parameter: the literals its callers pass, to a
		// fixed point (a helper calling a helper).
		for n := 0; n < 3; n++ {
			for _, f := range files {
				w.calls(f)
			}
		}
	}
	out := make([]string, 0, len(found))
	for a := range found {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

type actionWalk struct {
	params map[string]int // helper name → index of its action parameter
	found  map[string]bool
}

func isAuditType(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name == "Audit" || x.Name == "AuditRow"
	case *ast.SelectorExpr:
		return x.Sel.Name == "Audit" || x.Sel.Name == "AuditRow"
	}
	return false
}

func (w *actionWalk) file(f *ast.File) {
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CompositeLit:
				if !isAuditType(x.Type) {
					return true
				}
				for _, el := range x.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Action" {
							w.value(fd, kv.Value)
						}
					}
				}
			case *ast.AssignStmt:
				// audit.Action = "events.replay_failed"
				for i, l := range x.Lhs {
					if s, ok := l.(*ast.SelectorExpr); ok && s.Sel.Name == "Action" && i < len(x.Rhs) {
						if v, ok := literal(x.Rhs[i]); ok && actionShape.MatchString(v) {
							w.found[v] = true
						}
					}
				}
			}
			return true
		})
	}
}

// value resolves an Action expression inside fd.
func (w *actionWalk) value(fd *ast.FuncDecl, e ast.Expr) {
	if v, ok := literal(e); ok {
		w.found[v] = true
		return
	}
	switch x := e.(type) {
	case *ast.BinaryExpr: // "recon.discrepancy." + map[State]string{…}[to]
		prefix, ok := literal(x.X)
		idx, ok2 := x.Y.(*ast.IndexExpr)
		if !ok || !ok2 {
			return
		}
		if m, ok := idx.X.(*ast.CompositeLit); ok {
			for _, el := range m.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok {
					if v, ok := literal(kv.Value); ok {
						w.found[prefix+v] = true
					}
				}
			}
		}
	case *ast.Ident:
		// A parameter: its callers' literals (see calls).
		i := 0
		for _, field := range fd.Type.Params.List {
			for _, name := range field.Names {
				if name.Name == x.Name {
					w.params[fd.Name.Name] = i
					return
				}
				i++
			}
		}
		// A local variable: every literal assigned to it.
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if as, ok := n.(*ast.AssignStmt); ok {
				for i, l := range as.Lhs {
					if id, ok := l.(*ast.Ident); ok && id.Name == x.Name && i < len(as.Rhs) {
						if v, ok := literal(as.Rhs[i]); ok {
							w.found[v] = true
						}
					}
				}
			}
			return true
		})
	}
}

// calls collects the literals passed as a helper's action parameter.
func (w *actionWalk) calls(f *ast.File) {
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			name := ""
			switch fn := c.Fun.(type) {
			case *ast.Ident:
				name = fn.Name
			case *ast.SelectorExpr:
				name = fn.Sel.Name
			case *ast.IndexExpr: // a generic helper called with its type
				if id, ok := fn.X.(*ast.Ident); ok {
					name = id.Name
				}
			}
			if i, ok := w.params[name]; ok && i < len(c.Args) {
				w.value(fd, c.Args[i])
			}
			return true
		})
	}
}

func literal(e ast.Expr) (string, bool) {
	b, ok := e.(*ast.BasicLit)
	if !ok || b.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(b.Value)
	return s, err == nil
}

// alarmActions finds what the alarm module writes to its own audit log
// (alarm_audit, shown on its storm panel): the action literal of each
// m.audit(ctx, actor, action, …) and of each Exec of its AuditInsert
// statement (…, at, actor, action, …). They are stored bare and named
// "alarm.<action>".
func alarmActions(files []*ast.File, found map[string]bool) {
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := c.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			at := -1
			switch {
			case sel.Sel.Name == "audit" && len(c.Args) > 2:
				at = 2
			case sel.Sel.Name == "Exec" && len(c.Args) > 4 && isAuditInsert(c.Args[1]):
				at = 4
			}
			if at >= 0 {
				if v, ok := literal(c.Args[at]); ok {
					found["alarm."+v] = true
				}
			}
			return true
		})
	}
}

func isAuditInsert(e ast.Expr) bool {
	c, ok := e.(*ast.CallExpr)
	if !ok || len(c.Args) != 1 {
		return false
	}
	v, ok := literal(c.Args[0])
	return ok && v == "AuditInsert"
}
