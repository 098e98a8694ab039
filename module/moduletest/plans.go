package moduletest

import (
	"io/fs"
	"testing"

	"github.com/keelwork/keel/internal/plantest"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/module"
)

// Lookup names one of a module's statements and how its generic plan
// must read Relation: by an index scan of one of Keys (its primary key, or
// the unique or foreign key the statement names rows by).
type Lookup struct {
	Statement string
	Relation  string
	Keys      []string
}

// RequireKeyLookups checks a module's statements against the statistics
// autovacuum may take at a quiet moment (docs/modules.md, "State tests,
// indexes and statistics"). On a fresh PostgreSQL schema of lines, setup
// runs first: rows in a settled state, ANALYZE, then the rows moved into
// the state the statements look for. Each statement's generic plan (the
// one a pooled session switches to) must then read its relation by key,
// one subtest each. queries holds the module's statements as its Queries
// reads them (queries/postgres/*.sql).
func RequireKeyLookups(t *testing.T, lines func(dialect string) []keelmigrate.Line, queries fs.FS,
	setup []string, lookups ...Lookup) {
	t.Helper()
	q, err := module.LoadQueries(queries, "queries", "postgres")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := testdb.OpenPostgres(t, &testdb.Options{Lines: lines})
	conn := plantest.Session(t, d.Pool(), setup...)
	for _, l := range lookups {
		t.Run(l.Statement, func(t *testing.T) {
			plantest.RequireKeyLookup(t, plantest.Generic(t, conn, q.Get(l.Statement)), l.Relation, l.Keys...)
		})
	}
}
