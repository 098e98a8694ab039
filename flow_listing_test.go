package keel

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
)

// TestClaimReusesCompleteListing: a claim whose listing held every key
// with backlog, each of which filled its share, leaves that listing to the
// next claim, which lists nothing. A key that got backlog meanwhile
// without a wake-up is not served from it; it is once the listing is
// forgotten, here because a key came back short of its share.
func TestClaimReusesCompleteListing(t *testing.T) {
	t.Parallel()
	testdb.Run(t, testClaimReusesCompleteListing[pgx.Tx], testClaimReusesCompleteListing[*sql.Tx])
}

func testClaimReusesCompleteListing[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	const queue = "listq"
	workers := NewWorkers()
	AddWorker(workers, turnProbeWorker{})
	// Not started: the test calls the claim itself, as a producer would.
	c, err := NewClient(d, &Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Workers: workers,
		Queues: map[string]QueueConfig{queue: {MaxWorkers: 48}}})
	if err != nil {
		t.Fatal(err)
	}
	insert := func(key string, n int) {
		t.Helper()
		params := make([]InsertParams, n)
		for i := range params {
			params[i] = InsertParams{Args: turnProbeArgs{}, Opts: &InsertOpts{Queue: queue, FlowKey: key}}
		}
		if _, err := c.InsertMany(ctx, params); err != nil {
			t.Fatal(err)
		}
	}
	keysOf := func(res *claimResult) map[string]int {
		got := map[string]int{}
		for _, r := range res.rows {
			got[r.FlowKey]++
		}
		return got
	}
	insert("a", 40)
	insert("b", 40)
	insert("c", 40)
	var l keyListing
	// 48 rows of room: 16 keys wide, so the three keys are all the listing
	// holds, 16 rows each.
	res, err := c.claim(ctx, queue, "", 48, 48, &l)
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(res); len(res.rows) != 48 || got["a"] != 16 || got["b"] != 16 || got["c"] != 16 {
		t.Fatalf("first claim took %v, want 16 of each key", got)
	}
	if kept, _ := l.reuse(time.Now()); !slices.Equal(kept, []string{"a", "b", "c"}) {
		t.Fatalf("listing kept %v, want [a b c]", kept)
	}

	insert("d", 1) // no producer here, so nothing forgets the listing
	res, err = c.claim(ctx, queue, res.cursor, 48, 48, &l)
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(res); len(res.rows) != 48 || got["d"] != 0 {
		t.Fatalf("second claim took %v, want 48 rows of a, b and c from the kept listing", got)
	}
	// Each key has 8 rows left: the claim comes back short, which forgets
	// the listing.
	res, err = c.claim(ctx, queue, res.cursor, 48, 48, &l)
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(res); len(res.rows) != 24 || got["d"] != 0 {
		t.Fatalf("third claim took %v, want the 24 rows left of a, b and c", got)
	}
	if kept, _ := l.reuse(time.Now()); kept != nil {
		t.Fatalf("listing kept %v after keys came back short", kept)
	}
	res, err = c.claim(ctx, queue, res.cursor, 48, 48, &l)
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(res); len(res.rows) != 1 || got["d"] != 1 {
		t.Fatalf("fourth claim took %v, want d's job from a new listing", got)
	}
}

// TestKeyListingForgets: a kept listing is gone after keyListingTTL and
// after a wake-up of its producer.
func TestKeyListingForgets(t *testing.T) {
	t.Parallel()
	var l keyListing
	now := time.Now()
	l.keep([]string{"b", "", "a"}, now)
	if kept, at := l.reuse(now.Add(keyListingTTL - time.Millisecond)); !slices.Equal(kept, []string{"", "a", "b"}) || !at.Equal(now) {
		t.Fatalf("reuse within the TTL: %v at %v", kept, at)
	}
	if kept, _ := l.reuse(now.Add(keyListingTTL)); kept != nil {
		t.Fatalf("reuse at the TTL: %v", kept)
	}
	p := &producer{wakeCh: make(chan struct{}, 1)}
	p.listing.keep([]string{"a"}, now)
	p.wake()
	if kept, _ := p.listing.reuse(now); kept != nil {
		t.Fatalf("reuse after a wake-up: %v", kept)
	}
	// Jobs without a key stay first whatever the cursor, as listed.
	if got := rotateListing([]string{"", "a", "b", "c"}, "a", 3); !slices.Equal(got, []string{"", "b", "c"}) {
		t.Fatalf("rotateListing: %v", got)
	}
}
