package keel_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// TestBatchItemsSettle: items parked for their ACK end by their outcome
// without a claim; failures count toward the key's auto-pause in the same
// transaction (the second of a threshold of 2 pauses the key, audited);
// once paused, the key's count is frozen (a later failure or success does
// not move it); a lost connection ends an item failed, uncounted; a settle
// of an item no longer parked changes nothing.
func TestBatchItemsSettle(t *testing.T) {
	both(t, testBatchItemsSettle[pgx.Tx], testBatchItemsSettle[*sql.Tx])
}

func testBatchItemsSettle[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	tb := newDeliveryTable(t, d)
	src := deliverySource{tb: tb}
	for i := range 5 {
		tb.add(t, fmt.Sprintf("d%d", i), "a", "failed", time.Now().Add(-time.Minute))
	}
	c := insertOnly(t, d)
	b := createBatch(t, c, src, deliveryFilter{}, keel.BatchOpts{Rate: -1, AutoPauseFailures: 2})
	ex := d.Executor()
	claimed, err := ex.JobClaim(ctx, &keeldriver.JobClaimParams{Queue: "default", Owner: "w", Max: 5, LeaseDuration: time.Minute})
	if err != nil || len(claimed) != 5 {
		t.Fatalf("claim: %v %d", err, len(claimed))
	}
	ids := map[string]int64{}
	var park []*keeldriver.JobFinishParams
	later := time.Now().Add(time.Minute)
	for _, j := range claimed {
		ids[j.Subject] = j.ID
		park = append(park, &keeldriver.JobFinishParams{ID: j.ID, Fence: j.Fence, State: keeltype.JobStateWaiting,
			WaitReason: keel.WaitACK, WaitDeadline: &later, AttemptDelta: -1})
	}
	if _, err := ex.JobFinishMany(ctx, park); err != nil {
		t.Fatal(err)
	}
	key := claimed[0].FlowKey
	failures := func() (int, bool) {
		k, err := c.FlowKeyGet(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return k.ConsecutiveFailures, k.PausedAt != nil
	}
	settle := func(want int, items ...keel.BatchSettle) {
		t.Helper()
		got, err := c.BatchItemsSettle(ctx, items)
		if err != nil || len(got) != want {
			t.Fatalf("settle %+v: applied %v, %v", items, got, err)
		}
	}
	settle(1, keel.BatchSettle{ID: ids["d0"], Err: errors.New("ack_rejected: result 9")})
	if n, paused := failures(); n != 1 || paused {
		t.Fatalf("after one failure: %d paused=%v", n, paused)
	}
	settle(2, keel.BatchSettle{ID: ids["d1"], Err: errors.New("ack_rejected: result 9")},
		keel.BatchSettle{ID: ids["d2"], Err: errors.New("conn_lost: gone"), Uncounted: true})
	if n, paused := failures(); n != 2 || !paused {
		t.Fatalf("at the threshold: %d paused=%v", n, paused)
	}
	settle(2, keel.BatchSettle{ID: ids["d3"], Err: errors.New("ack_timeout: none")},
		keel.BatchSettle{ID: ids["d4"], Success: true, Result: map[string]string{"record_status": "delivered"}})
	if n, paused := failures(); n != 2 || !paused {
		t.Fatalf("paused key moved: %d paused=%v", n, paused)
	}
	settle(0, keel.BatchSettle{ID: ids["d0"], Success: true})
	cur := assertExact(t, c, b.ID, 5)
	if cur.Counts[keeltype.OutcomeFailed] != 4 || cur.Counts[keeltype.OutcomeSuccess] != 1 {
		t.Fatalf("counts: %v", cur.Counts)
	}
	l, err := c.AuditList(ctx, &keel.AuditListParams{Action: "batch.autopause"})
	if err != nil || len(l) != 1 {
		t.Fatalf("auto-pause audits: %v %d", err, len(l))
	}
	j, err := c.JobGet(ctx, ids["d2"])
	if err != nil || j.State != keeltype.JobStateCancelled || keel.BatchOutcomeOf(j) != keeltype.OutcomeFailed {
		t.Fatalf("uncounted item: %v %+v", err, j)
	}
}
