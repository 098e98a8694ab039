package web

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text limits.
const (
	// MinReasonRunes is the shortest reason an audited action accepts,
	// counted in visible characters after trimming.
	MinReasonRunes = 5
	// MaxReasonRunes bounds a reason.
	MaxReasonRunes = 1000
	// MaxNameRunes bounds a name (an enterprise, a resource, a task).
	MaxNameRunes = 200
	// MaxPatternBytes bounds a flow-limit pattern or a key.
	MaxPatternBytes = 256
)

// problemText says what is wrong with s as text, or "" when it is fine:
// valid UTF-8, no control characters (NUL, newlines, tabs included), no
// invisible format characters other than spaces.
func problemText(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			return "contains control characters"
		}
	}
	return ""
}

// visible counts the characters that are neither spaces nor controls.
func visible(s string) int {
	n := 0
	for _, r := range s {
		if !unicode.IsSpace(r) && !unicode.IsControl(r) {
			n++
		}
	}
	return n
}

// Reason checks an audited action's reason and returns it trimmed. A
// reason is at least MinReasonRunes visible characters and at most
// MaxReasonRunes, valid UTF-8, without control characters. When it is not
// required, only the empty string means "no reason": a reason that is
// given (five spaces included) obeys the rule.
func Reason(s string, required bool) (string, error) {
	if s == "" && !required {
		return "", nil
	}
	if p := problemText(s); p != "" {
		return "", Invalid("reason %s", p)
	}
	t := strings.TrimSpace(s)
	if visible(t) < MinReasonRunes {
		return "", Invalid("reason must have at least %d visible characters (an incident, a ticket, an explanation)", MinReasonRunes)
	}
	if utf8.RuneCountInString(t) > MaxReasonRunes {
		return "", Invalid("reason must be at most %d characters", MaxReasonRunes)
	}
	return t, nil
}

// Name checks a required display name (field names it in the problem) and
// returns it trimmed: 1..max characters, at least one visible, valid
// UTF-8, no control characters. max 0 means MaxNameRunes.
func Name(field, s string, max int) (string, error) {
	if max <= 0 {
		max = MaxNameRunes
	}
	if p := problemText(s); p != "" {
		return "", Invalid("%s %s", field, p)
	}
	t := strings.TrimSpace(s)
	if visible(t) == 0 {
		return "", Invalid("%s is required", field)
	}
	if utf8.RuneCountInString(t) > max {
		return "", Invalid("%s must be at most %d characters", field, max)
	}
	return t, nil
}

// OptionalText checks free text that may be empty (a location, a filter
// value) and returns it trimmed: at most max characters, valid UTF-8, no
// control characters.
func OptionalText(field, s string, max int) (string, error) {
	if p := problemText(s); p != "" {
		return "", Invalid("%s %s", field, p)
	}
	t := strings.TrimSpace(s)
	if utf8.RuneCountInString(t) > max {
		return "", Invalid("%s must be at most %d characters", field, max)
	}
	return t, nil
}

// Pattern checks a flow-limit pattern or a flow key: 1..MaxPatternBytes of
// printable characters without spaces.
func Pattern(field, s string) (string, error) {
	if p := problemText(s); p != "" {
		return "", Invalid("%s %s", field, p)
	}
	if s == "" || len(s) > MaxPatternBytes {
		return "", Invalid("%s must be 1 to %d bytes", field, MaxPatternBytes)
	}
	if strings.IndexFunc(s, unicode.IsSpace) >= 0 {
		return "", Invalid("%s must not contain spaces", field)
	}
	return s, nil
}

// Identifier checks a machine name (a queue, a kind): 1-128 of
// A-Z a-z 0-9 _ . : -.
func Identifier(field, s string) (string, error) {
	ok := s != "" && len(s) <= 128
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_.:-", c) >= 0
	}
	if !ok {
		return "", Invalid("%s must be 1-128 of A-Z a-z 0-9 _ . : -", field)
	}
	return s, nil
}
