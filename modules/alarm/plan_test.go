package alarm

import (
	"testing"

	"github.com/keelwork/keel/internal/plantest"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/module/moduletest"
)

// TestPlansAfterAnalyze: every update of one alarm instance reads it by
// primary key, on a table analyzed while every instance had recovered (a
// quiet hour) and read after a storm opened them all. With a plain state
// test each update proved the predicate of alarm_instance_open_idx, which
// those statistics show empty, and its generic plan walked every open
// instance's entry for the one id.
func TestPlansAfterAnalyze(t *testing.T) {
	e := moduletest.Postgres(t, Lines)
	m, err := New(e.Host(nil))
	if err != nil {
		t.Fatal(err)
	}
	conn := plantest.Session(t, e.Driver.(*keelpgx.Driver).Pool(),
		`INSERT INTO alarm_instance (id, device, rule, rule_version, state, severity, peak_severity, peak_value,
		     first_value, last_value, count, first_at, last_at, boot, first_seq, last_seq, received_at, ver)
		 SELECT 'i' || g, 'd' || g, 'r' || (g % 10), 1, 'recovered', 1, 1, 0, 0, 0, 1, now(), now(), 1, 1, 1, now(), 1
		 FROM generate_series(1, 20000) g`,
		`ANALYZE alarm_instance`,
		`UPDATE alarm_instance SET state = (ARRAY['firing', 'acked', 'nodata'])[1 + abs(hashtext(id)) % 3]`)
	for _, name := range []string{"InstanceRepeat", "InstanceClearing", "InstanceEscalate", "InstanceResume",
		"InstanceNoData", "InstanceRecover", "InstanceAck"} {
		t.Run(name, func(t *testing.T) {
			plantest.RequireKeyLookup(t, plantest.Generic(t, conn, m.q.Get(name)), "alarm_instance", "alarm_instance_pkey")
		})
	}
}
