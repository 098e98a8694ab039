package delivery

import (
	"context"
	"testing"
	"time"
)

// TestReportOfAnApplicationNotYetCached: an instance files a report for an
// application created on another instance before its own application cache
// has seen it (its heartbeat, which refreshes the cache, is an hour here).
// The record still belongs to the application's enterprise and is found by
// the lookups that join it (the requeue, the console, the API).
func TestReportOfAnApplicationNotYetCached(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	other := e.start(testSettings("cmpp_addr", "off", "heartbeat", "1h"))
	i := e.start(testSettings("cmpp_addr", "off", "heartbeat", "1h"))
	ent := e.enterprise(other, "Acme")
	a := e.app(other, ent, "api", "c201", ProtoCMPP30, "")
	if _, ok := i.m.apps.get(a.ID); ok {
		t.Fatal("the instance already caches the new application: the test would not show anything")
	}
	rec := e.seed(i, a, StatusAwaitingACK, time.Now().Add(-time.Minute), "13800000002")
	if rec.EnterpriseID != ent {
		t.Fatalf("record filed under enterprise %d, want %d", rec.EnterpriseID, ent)
	}
	recs, err := i.m.st.recordsByIDs(context.Background(), []int64{rec.ID})
	if err != nil || len(recs) != 1 || recs[0].EnterpriseName != "Acme" {
		t.Fatalf("lookup of record %d: %v %v", rec.ID, recs, err)
	}
}
