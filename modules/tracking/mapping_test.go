package tracking

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/keelwork/keel/modules/tracking/domain"
)

// TestTrackingMappingReplay: a mapping change is first replayed over the
// stored history and its diff (which waybills would change milestone) is
// recorded and shown; nothing is applied until the version is activated,
// which is refused before a replay; activation applies the events that
// waited for a mapping, and leaves results already applied as they were.
func TestTrackingMappingReplay(t *testing.T) { runBoth(t, testMappingReplay, testMappingReplay) }

func testMappingReplay[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	m, _ := e.module(t)
	ev := func(wb string, seq int, code string) string {
		return fmt.Sprintf(`{"events":[{"event_id":"%s-%d","waybill":"%s","seq":%d,"code":"%s","occurred_at":"2026-12-01T10:0%d:00+08:00"}]}`, wb, seq, wb, seq, code, seq)
	}
	for _, x := range []struct {
		wb    string
		codes []string
	}{{"MR0001", []string{"COLLECT", "HANDOVER"}}, {"MR0002", []string{"COLLECT", "EXPORT"}}, {"MR0003", []string{"COLLECT", "EXCEPT"}}} {
		for i, code := range x.codes {
			ingestOne(t, m, "cnhub", ev(x.wb, i+1, code))
		}
	}
	c, _ := m.carrier("cnhub")
	codes := maps.Clone(c.Codes)
	codes["HANDOVER"] = domain.Departed // a code the carrier added
	codes["EXCEPT"] = domain.Returned   // a code re-interpreted
	v, err := m.CreateMapping(ctx, "cnhub", codes, "map HANDOVER, EXCEPT means returned", "alice")
	if err != nil || v != 2 {
		t.Fatalf("create v2: %d %v", v, err)
	}
	if _, err := m.ActivateMapping(ctx, "cnhub", v, "alice", "roll out v2 now"); !errors.Is(err, ErrReplayFirst) {
		t.Fatalf("activation before a replay: %v", err)
	}
	res, err := m.ReplayMapping(ctx, "cnhub", v, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if res.Waybills != 3 || res.Changed != 2 || len(res.Entries) != 2 || res.BaseVersion != 1 {
		t.Fatalf("replay: %+v", res)
	}
	want := []DiffEntry{{Waybill: "MR0001", From: domain.PickedUp, To: domain.Departed},
		{Waybill: "MR0003", From: domain.Exception, To: domain.Returned, Stays: true}}
	for i, w := range want {
		if res.Entries[i] != w {
			t.Errorf("diff[%d] = %+v, want %+v", i, res.Entries[i], w)
		}
	}
	// The replay applied nothing.
	for wb, ms := range map[string]domain.Milestone{"MR0001": domain.PickedUp, "MR0002": domain.Departed, "MR0003": domain.Exception} {
		w, _ := m.store.GetWaybill(ctx, nil, "cnhub", wb)
		if w.State.Milestone != ms || w.MappingVersion != 1 {
			t.Fatalf("%s after the replay: %+v v%d", wb, w.State, w.MappingVersion)
		}
	}
	listed, err := m.Replays(ctx, "cnhub", 10)
	if err != nil || len(listed) != 1 || len(listed[0].Entries) != 2 {
		t.Fatalf("replays: %+v %v", listed, err)
	}
	applied, err := m.ActivateMapping(ctx, "cnhub", v, "alice", "reviewed the replay diff")
	if err != nil || applied != 1 {
		t.Fatalf("activate: %d %v", applied, err)
	}
	for wb, want := range map[string]struct {
		ms domain.Milestone
		v  int
	}{"MR0001": {domain.Departed, 2}, "MR0002": {domain.Departed, 1}, "MR0003": {domain.Exception, 1}} {
		w, _ := m.store.GetWaybill(ctx, nil, "cnhub", wb)
		if w.State.Milestone != want.ms || w.MappingVersion != want.v {
			t.Errorf("%s after rollout: %s v%d, want %s v%d", wb, w.State.Milestone, w.MappingVersion, want.ms, want.v)
		}
	}
	if _, err := m.ActivateMapping(ctx, "cnhub", v, "alice", "again please"); err == nil {
		t.Fatal("activated an active version again")
	}
	vs, _ := m.store.MappingVersions(ctx, "cnhub")
	if len(vs) != 2 || vs[0].State != "active" || vs[1].State != "retired" {
		t.Fatalf("versions: %+v", vs)
	}
}
