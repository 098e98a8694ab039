// Package carrierapi speaks to carriers: it verifies their signed webhook
// pushes (HMAC-SHA256 over the timestamp and the raw body, several secrets
// during a rotation, a timestamp window), decodes their event batches, and
// queries their pull API, classifying every failure as retryable (network,
// 5xx, 429 with its Retry-After) or permanent (authentication, parameters).
package carrierapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel/modules/tracking/domain"
)

// Reasons a push is refused; each is counted as a security event.
var (
	ErrNoSignature  = errors.New("missing_signature")
	ErrBadSignature = errors.New("bad_signature")
	ErrNoTimestamp  = errors.New("missing_timestamp")
	ErrStale        = errors.New("timestamp_outside_window")
)

// Sign computes the signature header value of body at ts with secret:
// "sha256=" + hex HMAC-SHA256(secret, ts + "." + body). The timestamp is
// inside the MAC so that a captured push cannot be replayed with a fresh
// timestamp.
func Sign(secret string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(ts, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// SignRequest sets both headers of a push.
func SignRequest(h http.Header, c *domain.Carrier, secret string, ts time.Time, body []byte) {
	h.Set(c.TimestampHeader, strconv.FormatInt(ts.Unix(), 10))
	h.Set(c.SignatureHeader, Sign(secret, ts.Unix(), body))
}

// Verify checks a push's signature against every secret of c (the current
// one and those still accepted during a rotation), in constant time per
// secret, and its timestamp against c's window. It returns which secret
// matched (0 = current).
func Verify(c *domain.Carrier, h http.Header, body []byte, now time.Time) (int, error) {
	sig := strings.TrimSpace(h.Get(c.SignatureHeader))
	if sig == "" {
		return -1, ErrNoSignature
	}
	tsText := strings.TrimSpace(h.Get(c.TimestampHeader))
	if tsText == "" {
		return -1, ErrNoTimestamp
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil || len(tsText) > 12 {
		return -1, ErrNoTimestamp
	}
	hexMAC, ok := strings.CutPrefix(sig, "sha256=")
	if !ok || len(hexMAC) != 64 {
		return -1, ErrBadSignature
	}
	got, err := hex.DecodeString(hexMAC)
	if err != nil {
		return -1, ErrBadSignature
	}
	match := -1
	for i, secret := range c.Secrets {
		want, _ := hex.DecodeString(strings.TrimPrefix(Sign(secret, ts, body), "sha256="))
		if hmac.Equal(got, want) && match < 0 {
			match = i
		}
	}
	if match < 0 {
		return -1, ErrBadSignature
	}
	// The window is checked after the MAC: an attacker learns nothing
	// about the window from unsigned requests.
	if d := now.Sub(time.Unix(ts, 0)); d > time.Duration(c.TimestampWindow) || -d > time.Duration(c.TimestampWindow) {
		return -1, fmt.Errorf("%w: %s off", ErrStale, d.Round(time.Second))
	}
	return match, nil
}
