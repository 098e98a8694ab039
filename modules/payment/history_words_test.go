package payment

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/keelwork/keel/module/web"
)

// TestHistoryReasonsHaveWords reads the module's source for every reason
// it writes into a payment's or a refund's state history — the reason
// argument of history, moveRefund, settleRefund, failRefund and
// closePayment, a literal or a literal joined with a value — and checks
// the payment page says each in words in both languages.
func TestHistoryReasonsHaveWords(t *testing.T) {
	t.Parallel()
	reasonArg := map[string]int{"history": 7, "moveRefund": 5, "settleRefund": 4, "failRefund": 4, "closePayment": 2}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := 0
	for _, f := range files {
		if filepath.Ext(f) != ".go" || len(f) > 8 && f[len(f)-8:] == "_test.go" {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			i, ok := reasonArg[sel.Sel.Name]
			if !ok || len(call.Args) <= i {
				return true
			}
			text, ok := sample(call.Args[i])
			if !ok {
				return true // a parameter passed on: its callers' literals are read
			}
			if strings.HasPrefix(text, placeholder) {
				return true // "<source> <transaction>": the sources are checked below
			}
			found++
			for _, lang := range []string{"zh", "en"} {
				if w := web.ReasonWord(lang, Name, text, nil); w == text {
					t.Errorf("%s: the history reason %q has no words in %s", fset.Position(call.Pos()), text, lang)
				}
			}
			return true
		})
	}
	if found < 12 {
		t.Fatalf("found %d history reasons in the source; the walk misses some", found)
	}
	// A payment confirmed by a callback, a query or reconciliation
	// (evidence.source) with its transaction id.
	for _, src := range []string{"callback", "query", "recon"} {
		text := src + " " + placeholder
		if w := web.ReasonWord("zh", Name, text, nil); w == text || !strings.Contains(w, placeholder) {
			t.Errorf("the history reason %q reads %q", text, w)
		}
	}
}

// placeholder stands in for a value joined to a literal reason.
const placeholder = "T4200000001"

// sample is the text an argument writes: a string literal, or literals
// joined with values (a transaction id, an error), each value standing in
// as one word.
func sample(e ast.Expr) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(x.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			return "", false
		}
		l, lok := sample(x.X)
		r, rok := sample(x.Y)
		if !lok && !rok {
			return "", false
		}
		if !lok {
			l = placeholder
		}
		if !rok {
			r = placeholder
		}
		return l + r, true
	}
	return "", false
}
