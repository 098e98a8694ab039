package keel

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

type turnProbeArgs struct{}

func (turnProbeArgs) Kind() string { return "turn_probe" }

type turnProbeWorker struct{}

func (turnProbeWorker) Work(context.Context, *Job[turnProbeArgs]) error { return nil }

// claimingClient is a client that works queue with turnProbeWorker, not
// started: its test calls the claim itself, as a producer would.
func claimingClient[TTx any](t *testing.T, d keeldriver.Driver[TTx], queue string, qc QueueConfig) *Client[TTx] {
	t.Helper()
	workers := NewWorkers()
	AddWorker(workers, turnProbeWorker{})
	c, err := NewClient(d, &Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Workers: workers,
		Queues: map[string]QueueConfig{queue: qc}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGatedSlotsGoInListingOrder: a claim whose key listing wraps around
// the end of the key order (it starts after the cursor) gives its free
// slots to the keys right after the cursor, not to the first keys in key
// order, which is the order their rows come back locked in. Given in key
// order, the keys before the cursor took the slots, the keys after it were
// counted starved, the cursor stayed where it was, and the next claim
// listed and served the same keys again: the keys after the cursor never
// ran while those before it had work.
func TestGatedSlotsGoInListingOrder(t *testing.T) {
	t.Parallel()
	testdb.Run(t, testGatedSlotsGoInListingOrder[pgx.Tx], testGatedSlotsGoInListingOrder[*sql.Tx])
}

func testGatedSlotsGoInListingOrder[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	const queue = "turnq"
	var keys []string
	for k := range 7 {
		keys = append(keys, fmt.Sprintf("%s:k%d", queue, k))
	}
	c := claimingClient(t, d, queue, QueueConfig{MaxWorkers: 2, FlowKeys: func() []string { return keys }})
	if _, err := c.FlowLimitSet(ctx, &keeltype.FlowLimit{Pattern: queue + ":*", Queue: queue, MaxRunning: 64}, "test"); err != nil {
		t.Fatal(err)
	}
	var params []InsertParams
	for range 3 {
		for _, k := range keys {
			params = append(params, InsertParams{Args: turnProbeArgs{}, Opts: &InsertOpts{Queue: queue, FlowKey: k}})
		}
	}
	if _, err := c.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	// The listing after k4 is k5, k6, k0, k1, k2, k3, k4; two slots free.
	res, err := c.claim(ctx, queue, queue+":k4", 2, len(keys), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res.rows {
		got = append(got, r.FlowKey)
	}
	slices.Sort(got)
	if want := []string{queue + ":k5", queue + ":k6"}; !slices.Equal(got, want) {
		t.Fatalf("two free slots after %s:k4 went to %v, want %v (listing %v)", queue, got, want, res.keys)
	}
	if res.cursor != queue+":k6" {
		t.Fatalf("next claim starts after %q, want after %s:k6 (the last key served)", res.cursor, queue)
	}
}
