package domain

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
)

// DefaultVolatileFields are fields a carrier may change on every push of
// the same event (when it was sent, a delivery attempt counter, a request
// id); they are left out of the normalized payload's digest so that a
// retried push is recognised as the same event.
var DefaultVolatileFields = []string{"pushed_at", "sent_at", "attempt", "retry", "request_id", "signature", "received_at", "ts"}

// RawEvent is one carrier event as received, before normalization.
type RawEvent struct {
	// SourceID is the carrier's event id ("" when it sends none).
	SourceID string
	Waybill  string
	Code     string
	Seq      int64
	// OccurredRaw is the carrier's occurred-at text as sent.
	OccurredRaw string
	Location    string
	// Payload is the event's JSON object as received.
	Payload json.RawMessage
}

// NormalizedDigest is the hex SHA-256 of payload re-encoded canonically
// (object keys sorted, insignificant whitespace gone, numbers as written)
// without the volatile top-level fields.
func NormalizedDigest(payload []byte, volatile []string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return "", errors.New("the event is not a JSON object")
	}
	for _, f := range volatile {
		delete(obj, f)
	}
	canon, err := json.Marshal(obj) // map keys are sorted by encoding/json
	if err != nil {
		return "", err
	}
	return hexSum(canon), nil
}

// Fingerprint is the idempotency key of an event without a source id: the
// carrier, waybill, event code, occurred-at, location and the digest of
// the normalized payload, length-prefixed so that no two field lists
// encode alike.
func Fingerprint(carrier string, ev RawEvent, payloadDigest string) string {
	return "fp:" + hexSum([]byte(fields(carrier, ev.Waybill, ev.Code, ev.OccurredRaw, ev.Location, payloadDigest)))
}

// IdempotencyKey is "id:<source id>" when the carrier sent one, else the
// fingerprint.
func IdempotencyKey(carrier string, ev RawEvent, payloadDigest string) string {
	if ev.SourceID != "" {
		return "id:" + ev.SourceID
	}
	return Fingerprint(carrier, ev, payloadDigest)
}

// CoreDigest summarizes the fields that make two events with one key the
// same event; the same key with another core digest is a collision.
func CoreDigest(ev RawEvent, payloadDigest string) string {
	return hexSum([]byte(fields(ev.Waybill, ev.Code, strconv.FormatInt(ev.Seq, 10), ev.OccurredRaw, ev.Location, payloadDigest)))
}

func fields(fs ...string) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(strconv.Itoa(len(f)))
		b.WriteByte(':')
		b.WriteString(f)
	}
	return b.String()
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// ParseOccurred reads a carrier's occurred-at: RFC 3339 with an offset is
// trusted; a local time without one ("2006-01-02T15:04:05" or with a space)
// is read in the carrier's zone, and trusted only when the carrier's
// configuration says its zone is reliable (zoneTrusted).
func ParseOccurred(s string, zone *time.Location, zoneTrusted bool) (time.Time, bool, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC().Truncate(time.Microsecond), true, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02 15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, zone); err == nil {
			return t.UTC(), zoneTrusted, nil
		}
	}
	return time.Time{}, false, errors.New("occurred_at must be RFC 3339 or a local time 2006-01-02T15:04:05")
}
