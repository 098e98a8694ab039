package cli_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelwork/keel/internal/browsertest"
)

// overflowJS lists the table cells of main whose content is wider than
// the cell, and the scroll boxes whose table is wider than the box (a
// clipped last column).
const overflowJS = `JSON.stringify([
  ...[...document.querySelectorAll("main td, main th")].filter(c => c.scrollWidth > c.clientWidth + 1)
     .map(c => "cell " + c.textContent.trim().slice(0, 40) + ": " + c.scrollWidth + " > " + c.clientWidth),
  ...[...document.querySelectorAll("main .scroll, main section")].filter(b => b.querySelector("table") && b.scrollWidth > b.clientWidth + 1)
     .map(b => "box " + (b.id || b.className) + ": " + b.scrollWidth + " > " + b.clientWidth)])`

// TestReleaseRunsPageFits opens the reservation module's release runs page
// (释放任务) in English, with the demo's runs in it, at 1,280 and 1,400 px:
// no table cell overflows and no table is wider than its box, so the last
// column is not clipped.
func TestReleaseRunsPageFits(t *testing.T) {
	t.Parallel()
	// The reservation module alone: the other demos add nothing to this
	// page and, beside the rest of the suite, minutes of CPU.
	srv, token, db := startServeWith(t, map[string]string{"demo": "true", "modules": "reservation"})
	waitValue(t, db, "a release run", `SELECT id FROM rsv_run ORDER BY id LIMIT 1`, 1)
	base := srv.URL()
	br := browsertest.New(t, 2*time.Minute)
	br.Login(base, token)
	for _, width := range []int64{1280, 1400} {
		step := fmt.Sprintf("release runs in English at %d px", width)
		br.Do(step, chromedp.EmulateViewport(width, 900), chromedp.Navigate(base+"/reservation/runs?lang=en"),
			chromedp.WaitVisible(chromedp.CSS("main table")), br.Shot(fmt.Sprintf("reservation-runs-en-%d", width)))
		raw, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](overflowJS))
		if err != nil {
			t.Fatal(err)
		}
		var over []string
		if err := json.Unmarshal([]byte(raw), &over); err != nil {
			t.Fatal(err)
		}
		for _, o := range over {
			t.Errorf("%s: %s", step, o)
		}
	}
}
