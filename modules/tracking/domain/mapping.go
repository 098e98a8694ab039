package domain

import (
	"fmt"
	"sort"
	"time"
)

// Mapping maps one carrier's event codes to milestones under a version.
// Every result keeps the version it was mapped under, so an upgrade can be
// replayed over history and compared before it is rolled out.
type Mapping struct {
	Carrier string
	Version int
	Codes   map[string]Milestone
}

// Normalize maps a code; false means the code is unmapped (the event waits
// for a mapping and advances nothing).
func (m *Mapping) Normalize(code string) (Milestone, bool) {
	if m == nil {
		return "", false
	}
	ms, ok := m.Codes[code]
	return ms, ok
}

// Validate checks codes and milestones.
func (m *Mapping) Validate() error {
	if len(m.Codes) == 0 {
		return fmt.Errorf("mapping of %s has no codes", m.Carrier)
	}
	if len(m.Codes) > 1000 {
		return fmt.Errorf("mapping of %s has %d codes; at most 1000", m.Carrier, len(m.Codes))
	}
	for code, ms := range m.Codes {
		if !validCode(code) {
			return fmt.Errorf("event code %q must be 1-64 of A-Z a-z 0-9 _ . -", code)
		}
		if !ms.Valid() {
			return fmt.Errorf("code %s maps to unknown milestone %q", code, ms)
		}
	}
	return nil
}

// SortedCodes lists the mapped codes.
func (m *Mapping) SortedCodes() []string {
	out := make([]string, 0, len(m.Codes))
	for c := range m.Codes {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

func validCode(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// ReplayEvent is a stored event as a replay reads it.
type ReplayEvent struct {
	Waybill     string
	Key         string
	Seq         int64
	Code        string
	OccurredAt  time.Time
	TimeTrusted bool
}

// Fold recomputes a waybill's aggregate from its stored events under m:
// what the aggregate would be had every event arrived under this mapping.
// The order of evs does not matter (Advance's order is total).
func Fold(evs []ReplayEvent, m *Mapping, sequenced bool) State {
	var s State
	for _, e := range evs {
		ms, ok := m.Normalize(e.Code)
		if !ok {
			continue
		}
		d := Advance(s, Event{Key: e.Key, Seq: e.Seq, Milestone: ms, OccurredAt: e.OccurredAt, TimeTrusted: e.TimeTrusted}, sequenced)
		s = d.Next
	}
	return s
}
