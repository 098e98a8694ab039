package store

import (
	"os"
	"testing"

	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/module/moduletest"
)

// TestPlansAfterAnalyze: closing a push's gaps reads each by primary key
// on a table analyzed while no gap was open and read after a backlog
// opened many. With a plain "closed_at IS NULL" the statement proved
// tracking_gap_open_idx's predicate, which those statistics show empty,
// and its generic plan hashed every open gap of the carrier for the few
// the push closes.
func TestPlansAfterAnalyze(t *testing.T) {
	// The module's migrations, read from its directory: importing the
	// module from its own store would be a cycle.
	lines := func(dialect string) []keelmigrate.Line {
		return keelmigrate.DialectLines("tracking", os.DirFS(".."), "migrations", dialect)
	}
	moduletest.RequireKeyLookups(t, lines, queryFiles, []string{
		`INSERT INTO tracking_gap (carrier, waybill, seq, opened_at, closed_at, closed_raw_id)
		 SELECT 'c1', 'w' || (g / 10), g % 10, now(), now(), g FROM generate_series(1, 30000) g`,
		`ANALYZE tracking_gap`,
		`UPDATE tracking_gap SET closed_at = NULL, closed_raw_id = NULL`,
	}, moduletest.Lookup{Statement: "GapCloseBatch", Relation: "tracking_gap", Keys: []string{"tracking_gap_pkey"}})
}
