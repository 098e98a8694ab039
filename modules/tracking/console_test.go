package tracking

import (
	"context"
	"testing"

	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
)

func TestTrackingConsoleHomeAndSearch(t *testing.T) {
	runBoth(t, testConsoleHomeAndSearch, testConsoleHomeAndSearch)
}

// A carrier that skips an event leaves one open gap on the home, no
// breaker is open, and the waybill is found by its number or an
// unambiguous prefix, never by a LIKE wildcard.
func testConsoleHomeAndSearch[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	m, _ := e.module(t)
	home := func() map[string]module.Stat { return moduletest.HomeStats(t, m) }
	if s := home(); s["open_gaps"].Value != 0 || s["open_breakers"].Value != 0 {
		t.Fatalf("empty: %+v", s)
	}
	ingestOne(t, m, "cnhub", `{"events":[`+cnEvent(1, "COLLECT")+`]}`)
	ingestOne(t, m, "cnhub", `{"events":[`+cnEvent(3, "ARRIVE")+`]}`)
	s := home()
	if s["open_gaps"].Value != 1 || s["open_gaps"].Level != module.LevelWarn || s["open_breakers"].Value != 0 {
		t.Fatalf("after a skipped event: %+v", s)
	}
	for _, q := range []string{"WB9001", "WB90"} {
		hits, err := m.Search(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 1 || hits[0].Path != "/tracking/waybills/cnhub/WB9001" || hits[0].Title != "cnhub · WB9001 · 到港" {
			t.Fatalf("search %q: %+v", q, hits)
		}
	}
	for _, q := range []string{"WB%", "W_9001", "XX1"} {
		if hits, err := m.Search(ctx, q); err != nil || len(hits) != 0 {
			t.Fatalf("search %q: %+v %v", q, hits, err)
		}
	}
}
