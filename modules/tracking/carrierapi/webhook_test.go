package carrierapi

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel/modules/tracking/domain"
)

func testCarrier(t testing.TB) *domain.Carrier {
	c, err := domain.DemoCarriers()[0].WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	c.Secrets = []string{"current-secret-0123456789", "previous-secret-0123456789"}
	return &c
}

func TestVerify(t *testing.T) {
	c := testCarrier(t)
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"events":[]}`)
	sign := func(secret string, ts time.Time, b []byte) http.Header {
		h := http.Header{}
		SignRequest(h, c, secret, ts, b)
		return h
	}
	if i, err := Verify(c, sign(c.Secrets[0], now, body), body, now); err != nil || i != 0 {
		t.Fatalf("current secret: %d %v", i, err)
	}
	if i, err := Verify(c, sign(c.Secrets[1], now, body), body, now); err != nil || i != 1 {
		t.Fatalf("previous secret: %d %v", i, err)
	}
	bad := []struct {
		name string
		h    http.Header
		body []byte
		want error
	}{
		{"other secret", sign("someone-elses-secret-000", now, body), body, ErrBadSignature},
		{"other body", sign(c.Secrets[0], now, body), []byte(`{"events":[1]}`), ErrBadSignature},
		{"too old", sign(c.Secrets[0], now.Add(-6*time.Minute), body), body, ErrStale},
		{"from the future", sign(c.Secrets[0], now.Add(6*time.Minute), body), body, ErrStale},
		{"no signature", http.Header{c.TimestampHeader: {"1800000000"}}, body, ErrNoSignature},
		{"no timestamp", http.Header{c.SignatureHeader: {Sign(c.Secrets[0], now.Unix(), body)}}, body, ErrNoTimestamp},
		{"timestamp moved", func() http.Header {
			h := sign(c.Secrets[0], now.Add(-time.Hour), body)
			h.Set(c.TimestampHeader, strconv.FormatInt(now.Unix(), 10))
			return h
		}(), body, ErrBadSignature},
		{"not hex", http.Header{c.TimestampHeader: {"1800000000"}, c.SignatureHeader: {"sha256=" + strings.Repeat("z", 64)}}, body, ErrBadSignature},
	}
	for _, b := range bad {
		if _, err := Verify(c, b.h, b.body, now); err == nil || !strings.HasPrefix(err.Error(), b.want.Error()) {
			t.Errorf("%s: %v, want %v", b.name, err, b.want)
		}
	}
}

// FuzzVerify: whatever the headers and body, Verify never panics, and it
// accepts only a signature one of the carrier's secrets made over exactly
// that timestamp and body, inside the window.
func FuzzVerify(f *testing.F) {
	c := testCarrier(f)
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"events":[{"waybill":"WB9001","code":"A","occurred_at":"2026-12-01T10:00:00Z"}]}`)
	f.Add(Sign(c.Secrets[0], now.Unix(), body), "1800000000", body)
	f.Add(Sign(c.Secrets[1], now.Unix(), body), "1800000000", body)
	f.Add("sha256=00", "1800000000", body)
	f.Add("", "", []byte{})
	f.Add("sha256="+strings.Repeat("0", 64), "-1", []byte("{}"))
	f.Fuzz(func(t *testing.T, sig, ts string, b []byte) {
		h := http.Header{}
		h.Set(c.SignatureHeader, sig)
		h.Set(c.TimestampHeader, ts)
		i, err := Verify(c, h, b, now)
		if err != nil {
			return
		}
		n, perr := strconv.ParseInt(strings.TrimSpace(ts), 10, 64)
		if perr != nil || i < 0 || i >= len(c.Secrets) || strings.ToLower(strings.TrimSpace(sig)) != Sign(c.Secrets[i], n, b) {
			t.Fatalf("accepted a signature no secret made: sig=%q ts=%q", sig, ts)
		}
		if d := now.Sub(time.Unix(n, 0)); d > 5*time.Minute || d < -5*time.Minute {
			t.Fatalf("accepted a timestamp %s outside the window", d)
		}
	})
}

// FuzzDecodeBatch: any body either decodes to events that all pass the
// field rules, or is refused as malformed; never a panic.
func FuzzDecodeBatch(f *testing.F) {
	f.Add([]byte(`{"events":[{"event_id":"e1","waybill":"WB9001","seq":1,"code":"A","occurred_at":"2026-12-01T10:00:00Z","location":"深圳"}]}`))
	f.Add([]byte(`{"events":[]}`))
	f.Add([]byte(`{"events":[{"waybill":"x"}]}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(`{"events":[{"waybill":"WB9001","code":"A","occurred_at":"t","seq":-1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		evs, err := DecodeBatch(b, false)
		if err != nil {
			return
		}
		for _, e := range evs {
			if !domain.ValidWaybill(e.Waybill) || e.Code == "" || e.OccurredRaw == "" || e.Seq < 0 || len(e.Payload) == 0 {
				t.Fatalf("accepted an invalid event %+v", e)
			}
		}
	})
}

func TestRetryAfter(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for h, want := range map[string]time.Duration{"": time.Second, "3": 3 * time.Second, "junk": time.Second, "99999": time.Hour,
		now.Add(7 * time.Second).UTC().Format(http.TimeFormat): 7 * time.Second} {
		if got := RetryAfter(h, now); got != want {
			t.Errorf("Retry-After %q: %s, want %s", h, got, want)
		}
	}
}
