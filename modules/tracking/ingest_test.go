package tracking

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/keelwork/keel/modules/tracking/carrierapi"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/ingest"
)

func decode(t testing.TB, batch string) []domain.RawEvent {
	t.Helper()
	evs, err := carrierapi.DecodeBatch([]byte(batch), false)
	if err != nil {
		t.Fatalf("decode %s: %v", batch, err)
	}
	return evs
}

func ingestOne[TTx any](t testing.TB, m *Module[TTx], carrier, batch string) ingest.Result {
	t.Helper()
	res, err := m.svc.Ingest(context.Background(), carrier, ingest.ViaWebhook, decode(t, batch))
	if err != nil || len(res) != 1 {
		t.Fatalf("ingest %s: %v %v", batch, res, err)
	}
	return res[0]
}

// TestTrackingFingerprintDedup: a carrier without event ids (epacket)
// pushes the same event again with a fresh pushed_at and its fields in
// another order: the fingerprint (carrier, waybill, code, occurred-at,
// location, digest of the normalized payload without volatile fields) is
// the same, one raw row is kept and the repeat returns the first result.
// A legitimately different event (another location) is a new event.
func TestTrackingFingerprintDedup(t *testing.T) {
	runBoth(t, testFingerprintDedup, testFingerprintDedup)
}

func testFingerprintDedup[TTx any](t *testing.T, e *env[TTx]) {
	m, _ := e.module(t)
	first := ingestOne(t, m, "epacket", `{"events":[{"waybill":"EP100200CN","code":"A","occurred_at":"2026-12-01 09:00:00","location":"深圳","pushed_at":"2026-12-01T01:00:01Z"}]}`)
	if first.Duplicate || first.Outcome != domain.Advanced || !strings.HasPrefix(first.Key, "fp:") {
		t.Fatalf("first push: %+v", first)
	}
	again := ingestOne(t, m, "epacket", `{"events":[{"pushed_at":"2026-12-01T01:05:00Z","location":"深圳","occurred_at":"2026-12-01 09:00:00","code":"A","waybill":"EP100200CN"}]}`)
	if !again.Duplicate || again.RawID != first.RawID || again.Outcome != first.Outcome || again.Revision != first.Revision || again.Key != first.Key {
		t.Fatalf("repeat: %+v, want the first result %+v", again, first)
	}
	other := ingestOne(t, m, "epacket", `{"events":[{"waybill":"EP100200CN","code":"A","occurred_at":"2026-12-01 09:00:00","location":"广州"}]}`)
	if other.Duplicate || other.Key == first.Key {
		t.Fatalf("another location deduplicated as the same event: %+v", other)
	}
	if n := e.Count(t, "SELECT count(*) FROM tracking_raw_event"); n != 2 {
		t.Fatalf("raw events: %d, want 2", n)
	}
	// The raw payload of the first push is kept as it came.
	tl, _ := m.store.Timeline(context.Background(), "epacket", "EP100200CN")
	if len(tl) != 2 || !strings.Contains(tl[0].Payload+tl[1].Payload, `"pushed_at":"2026-12-01T01:00:01Z"`) {
		t.Fatalf("timeline: %+v", tl)
	}
}

// TestTrackingCollision: the same source event id with other core fields
// (another location) is a collision: both payloads are quarantined, the
// first raw row is untouched and the aggregate does not move.
func TestTrackingCollision(t *testing.T) { runBoth(t, testCollision, testCollision) }

func testCollision[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	m, _ := e.module(t)
	first := ingestOne(t, m, "cnhub", `{"events":[{"event_id":"cn-1","waybill":"WB9001","seq":1,"code":"COLLECT","occurred_at":"2026-12-01T09:00:00+08:00","location":"深圳"}]}`)
	before, _ := m.store.GetWaybill(ctx, nil, "cnhub", "WB9001")
	col := ingestOne(t, m, "cnhub", `{"events":[{"event_id":"cn-1","waybill":"WB9001","seq":1,"code":"SIGNED","occurred_at":"2026-12-01T09:00:00+08:00","location":"洛杉矶"}]}`)
	if col.Outcome != domain.Collision || col.RawID != first.RawID || col.Duplicate {
		t.Fatalf("collision: %+v", col)
	}
	again := ingestOne(t, m, "cnhub", `{"events":[{"event_id":"cn-1","waybill":"WB9001","seq":1,"code":"SIGNED","occurred_at":"2026-12-01T09:00:00+08:00","location":"洛杉矶"}]}`)
	if again.Outcome != domain.Collision {
		t.Fatalf("repeated collision: %+v", again)
	}
	cols, err := m.store.Collisions(ctx, "cnhub", "", 10)
	if err != nil || len(cols) != 1 {
		t.Fatalf("collisions: %v %v", cols, err)
	}
	if !strings.Contains(cols[0].FirstPayload, "深圳") || !strings.Contains(cols[0].SecondPayload, "洛杉矶") {
		t.Fatalf("both payloads must be kept: %+v", cols[0])
	}
	after, _ := m.store.GetWaybill(ctx, nil, "cnhub", "WB9001")
	if after.State != before.State || after.State.Milestone != domain.PickedUp {
		t.Fatalf("a collision moved the aggregate: %+v → %+v", before.State, after.State)
	}
	var p json.RawMessage
	tl, _ := m.store.Timeline(ctx, "cnhub", "WB9001")
	if len(tl) != 1 || json.Unmarshal([]byte(tl[0].Payload), &p) != nil || !strings.Contains(tl[0].Payload, "深圳") {
		t.Fatalf("the first evidence was changed: %+v", tl)
	}
}
