package inventory

import (
	"os"
	"testing"

	"github.com/keelwork/keel/module/moduletest"
)

// TestPlansAfterAnalyze: putting off or rechecking one reservation reads it
// by primary key, on a table analyzed while none was reserved (every
// order confirmed) and read after a sale reserved them all. With a plain
// state test the generic plan served it from inv_reservation_due (state,
// check_after), whose state the statistics show rare, walking every
// reserved row for the one named.
func TestPlansAfterAnalyze(t *testing.T) {
	key := []string{"inv_reservation_pkey"}
	moduletest.RequireKeyLookups(t, testLines, os.DirFS("store"), []string{
		`INSERT INTO inv_reservation (order_line, warehouse_id, sku_id, qty, state, version, stock_version,
		     expires_at, check_after, created_at, updated_at)
		 SELECT 'l' || g, 'w', 's' || (g % 100), 1, 'confirmed', 1, 1, now(), now(), now(), now()
		 FROM generate_series(1, 20000) g`,
		`ANALYZE inv_reservation`,
		`UPDATE inv_reservation SET state = 'reserved'`,
	},
		moduletest.Lookup{Statement: "ReservationDelay", Relation: "inv_reservation", Keys: key},
		moduletest.Lookup{Statement: "ReservationRecheck", Relation: "inv_reservation", Keys: key})
}
