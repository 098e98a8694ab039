package reservation

import (
	"context"
	"database/sql"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/module"
)

// TestDueSaysDryRun: a reservation past its release point in a dry-run
// (gray switch) category is counted as due but never released; the runs
// page says how many of the due ones are in dry-run categories, in both
// languages, so the counter does not read as a stuck release.
func TestDueSaysDryRun(t *testing.T) {
	runBoth(t, testDueSaysDryRun[pgx.Tx], testDueSaysDryRun[*sql.Tx])
}

func testDueSaysDryRun[TTx any](t *testing.T, e *env[TTx]) {
	m := e.module(t)
	f := setup(t, m, 2)
	s := defaultSettings()
	s.ReleaseMode = ModeDryRun
	if _, err := m.CreateCategory(context.Background(), "vr", s, "test fixture"); err != nil {
		t.Fatal(err)
	}
	res, err := m.CreateResource(context.Background(), "vr", "VR-1", "2F")
	if err != nil {
		t.Fatal(err)
	}
	slot, err := m.CreateSlot(context.Background(), res.ID, t0, t0.Add(time.Hour), 2)
	if err != nil {
		t.Fatal(err)
	}
	dry := paid(t, m, slot.ID, "u-dry")
	paid(t, m, f.slot.ID, "u-on")
	e.clock.Set(*dry.ExpectedReleaseAt)
	mustScan(t, m)
	for lang, want := range map[string]string{"zh": "其中 1 个属于演练模式类别", "en": "1 of them in dry-run categories"} {
		body := get(t, console(m, lang, module.RoleOperator), "/reservation/runs")
		due := regexp.MustCompile(`(?s)<dd id="due">(.*?)</dd>`).FindStringSubmatch(body)
		if due == nil {
			t.Fatalf("%s: no due counter: %s", lang, body)
		}
		if !strings.HasPrefix(due[1], "1") || !strings.Contains(visible(due[1]), want) {
			t.Errorf("%s: due counter %q does not say %q", lang, visible(due[1]), want)
		}
	}
}
