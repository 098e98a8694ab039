package web

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// Error is a problem a handler reports: the server writes it as
// application/problem+json with Status and the stable Code.
type Error struct {
	Status int
	Code   string
	Detail string
}

func (e *Error) Error() string { return e.Code + ": " + e.Detail }

// Errorf builds an *Error.
func Errorf(status int, code, format string, args ...any) error {
	return &Error{Status: status, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// The engine's problem codes. A module adds its own with Register.
const (
	CodeInvalidArgument  = "invalid_argument"
	CodeInvalidJSON      = "invalid_json"
	CodeUnknownField     = "unknown_field"
	CodeInvalidCursor    = "invalid_cursor"
	CodeBodyTooLarge     = "body_too_large"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeUnauthenticated  = "unauthenticated"
	CodeForbidden        = "forbidden"
	CodeCSRF             = "csrf_failed"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeInvalidState     = "invalid_state"
	CodeStaleFence       = "stale_fence"
	CodeConflict         = "conflict"
	CodeUnavailable      = "unavailable"
	CodeInternal         = "internal"
)

// Entry is a catalogue entry: a code's one status and its title.
type Entry struct {
	Status int
	Title  string
}

var (
	catMu     sync.RWMutex
	catalogue = map[string]Entry{
		CodeInvalidArgument:  {http.StatusBadRequest, "Invalid argument"},
		CodeInvalidJSON:      {http.StatusBadRequest, "Malformed JSON body"},
		CodeUnknownField:     {http.StatusBadRequest, "Unknown field in body"},
		CodeInvalidCursor:    {http.StatusBadRequest, "Invalid paging cursor"},
		CodeBodyTooLarge:     {http.StatusRequestEntityTooLarge, "Request body too large"},
		CodeUnsupportedMedia: {http.StatusUnsupportedMediaType, "Body must be application/json"},
		CodeUnauthenticated:  {http.StatusUnauthorized, "Authentication required"},
		CodeForbidden:        {http.StatusForbidden, "Role not allowed"},
		CodeCSRF:             {http.StatusForbidden, "Missing or wrong CSRF token"},
		CodeNotFound:         {http.StatusNotFound, "Not found"},
		CodeMethodNotAllowed: {http.StatusMethodNotAllowed, "Method not allowed"},
		CodeInvalidState:     {http.StatusConflict, "Not allowed in the current state"},
		CodeStaleFence:       {http.StatusConflict, "Stale fence"},
		CodeConflict:         {http.StatusConflict, "Conflicts with stored data"},
		CodeUnavailable:      {http.StatusServiceUnavailable, "Database unavailable"},
		CodeInternal:         {http.StatusInternalServerError, "Internal error"},
	}
)

// Register adds a module's code to the catalogue (at init). A code already
// registered with another status panics: one code never means two things.
func Register(code string, status int, title string) {
	catMu.Lock()
	defer catMu.Unlock()
	if e, ok := catalogue[code]; ok && e.Status != status {
		panic(fmt.Sprintf("web: code %q is already registered with status %d", code, e.Status))
	}
	catalogue[code] = Entry{Status: status, Title: title}
}

// Lookup returns a code's catalogue entry.
func Lookup(code string) (Entry, bool) {
	catMu.RLock()
	defer catMu.RUnlock()
	e, ok := catalogue[code]
	return e, ok
}

// Codes lists the catalogue (for documentation and tests).
func Codes() map[string]Entry {
	catMu.RLock()
	defer catMu.RUnlock()
	out := make(map[string]Entry, len(catalogue))
	for k, v := range catalogue {
		out[k] = v
	}
	return out
}

// Problem builds an error for a catalogued code with its status.
func Problem(code, format string, args ...any) error {
	e, ok := Lookup(code)
	if !ok {
		e.Status = http.StatusInternalServerError
	}
	return &Error{Status: e.Status, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Invalid is a 400 invalid_argument problem.
func Invalid(format string, args ...any) error {
	return Problem(CodeInvalidArgument, format, args...)
}

// NotFound is a 404 not_found problem.
func NotFound(format string, args ...any) error {
	return Problem(CodeNotFound, format, args...)
}

// As returns err's *Error, if it carries one.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
