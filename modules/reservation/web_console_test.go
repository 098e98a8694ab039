package reservation

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/module"
)

func TestConsoleHomeAndSearch(t *testing.T) {
	runBoth(t, testConsoleHomeAndSearch[pgx.Tx], testConsoleHomeAndSearch[*sql.Tx])
}

// The home counts a paid reservation past its release time as due, a
// dry-run category as such, and no dead letters; the search finds the
// reservation by its number and nothing for a number no reservation has.
func testConsoleHomeAndSearch[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	m := e.module(t)
	f := setup(t, m, 2)
	r := paid(t, m, f.slot.ID, "u1")
	dry := defaultSettings()
	dry.ReleaseMode = ModeDryRun
	if _, err := m.CreateCategory(ctx, "trial", dry, "dry-run fixture"); err != nil {
		t.Fatal(err)
	}
	stats := func() map[string]module.Stat {
		t.Helper()
		list, err := m.Home(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]module.Stat{}
		for _, s := range list {
			out[s.Key] = s
		}
		return out
	}
	if s := stats(); s["due_unreleased"].Value != 0 || s["dry_run_categories"].Value != 1 || s["dead_letters"].Value != 0 {
		t.Fatalf("before the release point: %+v", s)
	}
	e.clock.Set(r.ExpectedReleaseAt.Add(time.Minute))
	s := stats()
	if s["due_unreleased"].Value != 1 || s["due_unreleased"].Level != module.LevelWarn || s["due_unreleased"].Link == "" {
		t.Fatalf("past the release point: %+v", s["due_unreleased"])
	}
	id := strconv.FormatInt(r.ID, 10)
	hits, err := m.Search(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].Path != "/reservation/reservations/"+id || hits[0].TitleEN == "" {
		t.Fatalf("search %s: %+v", id, hits)
	}
	for _, q := range []string{"999999", "not-a-number", "-1"} {
		if hits, err := m.Search(ctx, q); err != nil || len(hits) != 0 {
			t.Fatalf("search %q: %+v %v", q, hits, err)
		}
	}
}
