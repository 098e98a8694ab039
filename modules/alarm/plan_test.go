package alarm

import (
	"testing"

	"github.com/keelwork/keel/module/moduletest"
)

// TestPlansAfterAnalyze: every update of one alarm instance or notice reads
// it by primary key, on tables analyzed while every instance had recovered
// and every notice was settled (a quiet hour) and read after a storm
// opened them all. With a plain state test each instance update proved the
// predicate of alarm_instance_open_idx, and each notice update had an
// index condition on alarm_notice_state_idx (state, lane), both of which
// those statistics show empty, and the generic plan walked every open
// instance or pending notice for the one id (26 ms per update at 200,000
// open instances, against 0.12 ms by key).
func TestPlansAfterAnalyze(t *testing.T) {
	setup := []string{
		`INSERT INTO alarm_instance (id, device, rule, rule_version, state, severity, peak_severity, peak_value,
		     first_value, last_value, count, first_at, last_at, boot, first_seq, last_seq, received_at, ver)
		 SELECT 'i' || g, 'd' || g, 'r' || (g % 10), 1, 'recovered', 1, 1, 0, 0, 0, 1, now(), now(), 1, 1, 1, now(), 1
		 FROM generate_series(1, 20000) g`,
		`INSERT INTO alarm_notice (dedupe_key, instance_id, kind, level, lane, channel, state, body, created_at, event_at)
		 SELECT 'n' || g, 'i' || g, 'firing', 3, 'severe', 'webhook', 'merged', 'b', now(), now() FROM generate_series(1, 20000) g`,
		`ANALYZE alarm_instance`,
		`ANALYZE alarm_notice`,
		`UPDATE alarm_instance SET state = (ARRAY['firing', 'acked', 'nodata'])[1 + abs(hashtext(id)) % 3], peak_severity = 3`,
		`UPDATE alarm_notice SET state = (ARRAY['pending', 'held', 'sent', 'muted'])[1 + id % 4]`,
	}
	var lookups []moduletest.Lookup
	for _, name := range []string{"InstanceRepeat", "InstanceClearing", "InstanceEscalate", "InstanceResume",
		"InstanceNoData", "InstanceRecover", "InstanceAck"} {
		lookups = append(lookups, moduletest.Lookup{Statement: name, Relation: "alarm_instance", Keys: []string{"alarm_instance_pkey"}})
	}
	for _, name := range []string{"NoticeMerge", "NoticeRelease", "NoticeAttempt", "NoticeSent", "NoticeEscalated"} {
		lookups = append(lookups, moduletest.Lookup{Statement: name, Relation: "alarm_notice", Keys: []string{"alarm_notice_pkey"}})
	}
	// The severe reconciliation reaches an instance's notices by instance.
	lookups = append(lookups, moduletest.Lookup{Statement: "ReconSevere", Relation: "alarm_notice", Keys: []string{"alarm_notice_instance_idx"}})
	moduletest.RequireKeyLookups(t, Lines, queryFiles, setup, lookups...)
}
