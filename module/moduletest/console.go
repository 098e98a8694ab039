package moduletest

import (
	"context"
	"testing"

	"github.com/keelwork/keel/module"
)

// HomeStats is what m's card on the console's home shows the operator,
// by the stats' keys.
func HomeStats(t testing.TB, m module.Homer) map[string]module.Stat {
	t.Helper()
	list, err := m.Home(context.Background())
	if err != nil {
		t.Fatalf("home: %v", err)
	}
	out := map[string]module.Stat{}
	for _, s := range list {
		out[s.Key] = s
	}
	return out
}

// SearchPaths is the console paths the operator's search for q finds in m.
func SearchPaths(t testing.TB, m module.Searcher, q string) map[string]bool {
	t.Helper()
	hits, err := m.Search(context.Background(), q)
	if err != nil {
		t.Fatalf("search %q: %v", q, err)
	}
	out := map[string]bool{}
	for _, h := range hits {
		out[h.Path] = true
	}
	return out
}
