package tracking

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel/modules/tracking/carrierapi"
	"github.com/keelwork/keel/modules/tracking/sim"
)

// TestTrackingWebhookBadInput: pushes with bad signatures, a stale or
// missing timestamp, unknown carriers, malformed or oversized bodies are
// refused with the carrier's expected status, and nothing is written but
// the security counter; a push signed with the previous secret during a
// rotation is accepted.
func TestTrackingWebhookBadInput(t *testing.T) {
	runBoth(t, testWebhookBadInput, testWebhookBadInput)
}

func testWebhookBadInput[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	m, _ := e.module(t)
	srv := httptest.NewServer(m.Webhook())
	defer srv.Close()
	cnhub, _ := m.carrier("cnhub")
	epacket, _ := m.carrier("epacket")
	good := []byte(`{"events":[{"event_id":"e1","waybill":"WB9001","seq":1,"code":"COLLECT","occurred_at":"2026-12-01T10:00:00+08:00","location":"深圳"}]}`)
	now := e.Clock.Now()
	post := func(path string, body []byte, h map[string]string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("post: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	signed := func(secret string, ts time.Time, body []byte) map[string]string {
		h := http.Header{}
		carrierapi.SignRequest(h, cnhub, secret, ts, body)
		return map[string]string{cnhub.SignatureHeader: h.Get(cnhub.SignatureHeader), cnhub.TimestampHeader: h.Get(cnhub.TimestampHeader)}
	}
	big := append([]byte(`{"events":[{"waybill":"WB9001","code":"X","occurred_at":"2026-12-01T10:00:00Z","pad":"`), bytes.Repeat([]byte("a"), 300<<10)...)
	big = append(big, []byte(`"}]}`)...)
	epHeaders := http.Header{}
	carrierapi.SignRequest(epHeaders, epacket, "wrong-secret-wrong-secret", now, good)
	cases := []struct {
		name   string
		path   string
		body   []byte
		h      map[string]string
		status int
	}{
		{"unknown carrier", "/hooks/tracking/nosuch", good, signed(cnhub.Secrets[0], now, good), 404},
		{"no signature", "/hooks/tracking/cnhub", good, nil, 401},
		{"bad signature", "/hooks/tracking/cnhub", good, signed("not-the-secret-at-all", now, good), 401},
		{"tampered body", "/hooks/tracking/cnhub", bytes.Replace(good, []byte("COLLECT"), []byte("SIGNED"), 1), signed(cnhub.Secrets[0], now, good), 401},
		{"stale timestamp", "/hooks/tracking/cnhub", good, signed(cnhub.Secrets[0], now.Add(-10*time.Minute), good), 401},
		{"carrier's own reject status", "/hooks/tracking/epacket", good, map[string]string{epacket.SignatureHeader: epHeaders.Get(epacket.SignatureHeader), epacket.TimestampHeader: epHeaders.Get(epacket.TimestampHeader)}, 403},
		{"malformed", "/hooks/tracking/cnhub", []byte(`{"events":[{"waybill":"x"}]}`), signed(cnhub.Secrets[0], now, []byte(`{"events":[{"waybill":"x"}]}`)), 400},
		{"not json", "/hooks/tracking/cnhub", []byte(`nope`), signed(cnhub.Secrets[0], now, []byte(`nope`)), 400},
		{"oversized", "/hooks/tracking/cnhub", big, signed(cnhub.Secrets[0], now, big), 413},
	}
	for _, c := range cases {
		if got := post(c.path, c.body, c.h); got != c.status {
			t.Errorf("%s: status %d, want %d", c.name, got, c.status)
		}
	}
	for _, table := range []string{"tracking_raw_event", "tracking_waybill", "tracking_gap", "tracking_collision", "keel_events_outbox"} {
		if n := e.Count(t, "SELECT count(*) FROM "+table); n != 0 {
			t.Errorf("%s holds %d rows after refused pushes", table, n)
		}
	}
	if n := e.Count(t, "SELECT coalesce(sum(count), 0) FROM tracking_security"); n != int64(len(cases)) {
		t.Errorf("security counter %d, want %d", n, len(cases))
	}
	rows, _ := m.store.SecurityCounts(ctx)
	var reasons []string
	for _, r := range rows {
		reasons = append(reasons, r.Carrier+"/"+r.Reason)
	}
	if s := strings.Join(reasons, ","); !strings.Contains(s, "/unknown_carrier") || !strings.Contains(s, "cnhub/bad_signature") ||
		!strings.Contains(s, "cnhub/timestamp_outside_window") || !strings.Contains(s, "cnhub/oversized") || !strings.Contains(s, "cnhub/malformed") {
		t.Errorf("security reasons: %s", s)
	}

	// Rotation: the new secret is current, the old one still accepted.
	rot := *cnhub
	rot.Secrets = []string{"new-cnhub-secret-2027", cnhub.Secrets[0]}
	m.svc.Carriers["cnhub"] = &rot
	if got := post("/hooks/tracking/cnhub", good, signed(cnhub.Secrets[0], now, good)); got != 200 {
		t.Fatalf("push with the previous secret during rotation: %d", got)
	}
	if got := post("/hooks/tracking/cnhub", good, signed("new-cnhub-secret-2027", now, good)); got != 200 {
		t.Fatalf("push with the new secret: %d", got)
	}
	if n := e.Count(t, "SELECT count(*) FROM tracking_raw_event"); n != 1 {
		t.Fatalf("raw events %d, want 1 (the second push is a duplicate)", n)
	}
	_ = sim.Event{}
}
