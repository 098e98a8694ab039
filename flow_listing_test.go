package keel

import (
	"context"
	"database/sql"
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
	c := claimingClient(t, d, queue, QueueConfig{MaxWorkers: 48})
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
	cursor := ""
	// An hour: what is tested is what the claims keep and forget, which
	// under -race on a busy machine can take longer than 100 ms.
	l := keyListing{ttl: time.Hour}
	// claim makes one claim with 48 rows of room (16 keys wide) and counts
	// the rows it took by key.
	claim := func() (int, map[string]int) {
		t.Helper()
		res, err := c.claim(ctx, queue, cursor, 48, 48, &l)
		if err != nil {
			t.Fatal(err)
		}
		cursor = res.cursor
		got := map[string]int{}
		for _, r := range res.rows {
			got[r.FlowKey]++
		}
		return len(res.rows), got
	}
	insert("a", 40)
	insert("b", 40)
	insert("c", 40)
	// The three keys are all the listing holds, 16 rows each.
	if n, got := claim(); n != 48 || got["a"] != 16 || got["b"] != 16 || got["c"] != 16 {
		t.Fatalf("first claim took %v, want 16 of each key", got)
	}
	if kept, _, _ := l.reuse(time.Now()); !slices.Equal(kept, []string{"a", "b", "c"}) {
		t.Fatalf("listing kept %v, want [a b c]", kept)
	}

	insert("d", 1) // no producer here, so nothing forgets the listing
	if n, got := claim(); n != 48 || got["d"] != 0 {
		t.Fatalf("second claim took %v, want 48 rows of a, b and c from the kept listing", got)
	}
	// Each key has 8 rows left: the claim comes back short, which forgets
	// the listing.
	if n, got := claim(); n != 24 || got["d"] != 0 {
		t.Fatalf("third claim took %v, want the 24 rows left of a, b and c", got)
	}
	if kept, _, _ := l.reuse(time.Now()); kept != nil {
		t.Fatalf("listing kept %v after keys came back short", kept)
	}
	if n, got := claim(); n != 1 || got["d"] != 1 {
		t.Fatalf("fourth claim took %v, want d's job from a new listing", got)
	}
}

// TestKeyListingForgets: a kept listing is gone after keyListingTTL and
// after a wake-up of its producer.
func TestKeyListingForgets(t *testing.T) {
	t.Parallel()
	var l keyListing
	now := time.Now()
	l.keep([]string{"b", "", "a"}, now, 0)
	if kept, at, _ := l.reuse(now.Add(keyListingTTL - time.Millisecond)); !slices.Equal(kept, []string{"", "a", "b"}) || !at.Equal(now) {
		t.Fatalf("reuse within the TTL: %v at %v", kept, at)
	}
	if kept, _, _ := l.reuse(now.Add(keyListingTTL)); kept != nil {
		t.Fatalf("reuse at the TTL: %v", kept)
	}
	p := &producer{wakeCh: make(chan struct{}, 1)}
	p.listing.keep([]string{"a"}, now, 0)
	p.wake()
	if kept, _, _ := p.listing.reuse(now); kept != nil {
		t.Fatalf("reuse after a wake-up: %v", kept)
	}
	// A claim that began before a wake-up cannot keep its listing after
	// it: the listing may lack the key the wake-up announced.
	_, _, gen := p.listing.reuse(now)
	p.wake()
	p.listing.keep([]string{"a"}, now, gen)
	if kept, _, _ := p.listing.reuse(now); kept != nil {
		t.Fatalf("a claim from before the wake-up kept %v", kept)
	}
	// Jobs without a key stay first whatever the cursor, as listed.
	if got := rotateListing([]string{"", "a", "b", "c"}, "a", 3); !slices.Equal(got, []string{"", "b", "c"}) {
		t.Fatalf("rotateListing: %v", got)
	}
}
