package tracking

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/keelwork/keel/module/moduletest"
)

// TestTrackingAPIBadInput: bad parameters are refused with a problem
// before anything is read or written: unknown carriers 404, malformed
// waybills, versions, search text and unknown query parameters 400,
// mapping bodies with unknown milestones or no reason 400.
func TestTrackingAPIBadInput(t *testing.T) { runBoth(t, testAPIBadInput, testAPIBadInput) }

func testAPIBadInput[TTx any](t *testing.T, e *env[TTx]) {
	m, _ := e.module(t)
	api := moduletest.APIHandler(m.Routes(), "ops")
	cases := []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/api/v1/tracking/waybills?q=%27;drop", "", 400},
		{"GET", "/api/v1/tracking/waybills?bogus=1", "", 400},
		{"GET", "/api/v1/tracking/waybills?limit=0", "", 400},
		{"GET", "/api/v1/tracking/waybills?carrier=nosuch", "", 400},
		{"GET", "/api/v1/tracking/waybills/nosuch/WB9001", "", 404},
		{"GET", "/api/v1/tracking/waybills/cnhub/x", "", 400},
		{"GET", "/api/v1/tracking/waybills/cnhub/WB0000404", "", 404},
		{"POST", "/api/v1/tracking/waybills/cnhub/WB0000404/refresh", "", 404},
		{"POST", "/api/v1/tracking/carriers/cnhub/mappings/zero/replay", "", 400},
		{"POST", "/api/v1/tracking/carriers/cnhub/mappings/99/replay", "", 404},
		{"POST", "/api/v1/tracking/carriers/cnhub/mappings", `{"codes":{"A":"teleported"},"note":"a new code"}`, 400},
		{"POST", "/api/v1/tracking/carriers/cnhub/mappings", `{"codes":{"A":"picked_up"}}`, 400},
		{"POST", "/api/v1/tracking/carriers/cnhub/mappings", `{"codes":{"A":"picked_up"},"note":"x","extra":1}`, 400},
		{"POST", "/api/v1/tracking/carriers/cnhub/mappings/1/activate", `{"reason":"no"}`, 400},
	}
	for _, c := range cases {
		req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		if c.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		if rec.Code != c.status {
			t.Errorf("%s %s %s: %d, want %d", c.method, c.path, c.body, rec.Code, c.status)
		}
	}
	for _, table := range []string{"tracking_raw_event", "tracking_waybill", "tracking_replay"} {
		if n := e.Count(t, "SELECT count(*) FROM "+table); n != 0 {
			t.Errorf("%s holds %d rows after refused requests", table, n)
		}
	}
	if n := e.Count(t, "SELECT count(*) FROM tracking_mapping_version"); n != 3 {
		t.Errorf("mapping versions: %d, want the three initial ones", n)
	}
}
