package delivery

import (
	"database/sql"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
)

// TestMetricsRegisteredWithTheHost: the module's gauges go to the host's
// registerer, and a second module on the same registerer is refused
// rather than silently unexported.
func TestMetricsRegisteredWithTheHost(t *testing.T) {
	t.Parallel()
	d, _ := testdb.OpenSQLite(t, &testdb.Options{Lines: Lines})
	reg := prometheus.NewPedanticRegistry()
	h := &module.Host[*sql.Tx]{DB: keelsql.SQLite(d.DB()), Registerer: reg, Settings: map[string]string{"delivery.cmpp_addr": "off"}}
	if _, err := New(h); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "keel_delivery_connections", "keel_delivery_inflight_delivers", "keel_delivery_held_keys"); err != nil || n != 3 {
		t.Fatalf("gathered %d delivery metrics, %v", n, err)
	}
	if _, err := New(h); err == nil {
		t.Fatal("a second module registered the same metrics")
	}
}
