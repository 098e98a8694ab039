package carrierapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/keelwork/keel/modules/tracking/domain"
)

// Limits of a push or a pull response.
const (
	MaxBodyBytes      = 256 << 10
	MaxEventsPerBatch = 500
	MaxEventBytes     = 16 << 10
)

// ErrMalformed wraps every decoding failure of a batch.
var ErrMalformed = errors.New("malformed")

// Batch is what carriers push and what their pull API answers:
//
//	{"events": [{"event_id": "…", "waybill": "…", "seq": 42, "code": "CUSTOMS",
//	             "occurred_at": "2026-12-01T10:00:00+08:00", "location": "SZX", …}]}
//
// event_id and seq are optional (some carriers send neither); any other
// field is kept as part of the raw evidence.
type Batch struct {
	Events []json.RawMessage `json:"events"`
}

type wireEvent struct {
	EventID    string `json:"event_id"`
	Waybill    string `json:"waybill"`
	Seq        int64  `json:"seq"`
	Code       string `json:"code"`
	OccurredAt string `json:"occurred_at"`
	Location   string `json:"location"`
}

// DecodeBatch reads a batch strictly enough that nothing half-valid gets
// in: every event must be an object with a valid waybill, a code and an
// occurred-at; the whole batch is refused if one event is bad.
func DecodeBatch(body []byte, allowEmpty bool) ([]domain.RawEvent, error) {
	if len(body) > MaxBodyBytes {
		return nil, fmt.Errorf("%w: body over %d bytes", ErrMalformed, MaxBodyBytes)
	}
	var b Batch
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("%w: not a JSON batch", ErrMalformed)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data", ErrMalformed)
	}
	if (len(b.Events) == 0 && !allowEmpty) || len(b.Events) > MaxEventsPerBatch {
		return nil, fmt.Errorf("%w: a batch holds 1..%d events", ErrMalformed, MaxEventsPerBatch)
	}
	out := make([]domain.RawEvent, 0, len(b.Events))
	for i, raw := range b.Events {
		ev, err := decodeEvent(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: events[%d]: %v", ErrMalformed, i, err)
		}
		out = append(out, ev)
	}
	return out, nil
}

func decodeEvent(raw json.RawMessage) (domain.RawEvent, error) {
	if len(raw) > MaxEventBytes {
		return domain.RawEvent{}, fmt.Errorf("over %d bytes", MaxEventBytes)
	}
	var w wireEvent
	if err := json.Unmarshal(raw, &w); err != nil {
		return domain.RawEvent{}, errors.New("not an event object")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil || compact.Len() == 0 || compact.Bytes()[0] != '{' {
		return domain.RawEvent{}, errors.New("not an event object")
	}
	switch {
	case !domain.ValidWaybill(w.Waybill):
		return domain.RawEvent{}, errors.New("waybill must be 4-40 of A-Z a-z 0-9 -")
	case w.Code == "" || len(w.Code) > 64:
		return domain.RawEvent{}, errors.New("code is required (at most 64 bytes)")
	case w.OccurredAt == "" || len(w.OccurredAt) > 40:
		return domain.RawEvent{}, errors.New("occurred_at is required")
	case len(w.EventID) > 128 || !printable(w.EventID):
		return domain.RawEvent{}, errors.New("event_id must be at most 128 printable bytes")
	case len(w.Location) > 200 || !text(w.Location):
		return domain.RawEvent{}, errors.New("location must be at most 200 bytes")
	case w.Seq < 0 || w.Seq > 1<<40:
		return domain.RawEvent{}, errors.New("seq must be 0..2^40")
	}
	return domain.RawEvent{SourceID: w.EventID, Waybill: w.Waybill, Code: w.Code, Seq: w.Seq, OccurredRaw: w.OccurredAt,
		Location: w.Location, Payload: append(json.RawMessage(nil), compact.Bytes()...)}, nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// text reports whether s is valid UTF-8 without control characters.
func text(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
