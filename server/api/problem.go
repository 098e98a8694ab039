package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/server/auth"
)

// Code is a stable problem code; clients switch on it, never on messages.
type Code string

// The catalogue of problem codes, each with its one HTTP status.
const (
	CodeInvalidArgument  Code = "invalid_argument"
	CodeInvalidJSON      Code = "invalid_json"
	CodeUnknownField     Code = "unknown_field"
	CodeInvalidCursor    Code = "invalid_cursor"
	CodeBodyTooLarge     Code = "body_too_large"
	CodeUnsupportedMedia Code = "unsupported_media_type"
	CodeUnauthenticated  Code = "unauthenticated"
	CodeForbidden        Code = "forbidden"
	CodeCSRF             Code = "csrf_failed"
	CodeNotFound         Code = "not_found"
	CodeMethodNotAllowed Code = "method_not_allowed"
	CodeInvalidState     Code = "invalid_state"
	CodeStaleFence       Code = "stale_fence"
	CodeInternal         Code = "internal"
)

// Catalogue maps every code to its HTTP status and title.
var Catalogue = map[Code]struct {
	Status int
	Title  string
}{
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
	CodeInternal:         {http.StatusInternalServerError, "Internal error"},
}

// Error is an error with a problem code, raised by the API's own checks.
type Error struct {
	Code   Code
	Detail string
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Detail }

// Errorf builds an *Error.
func Errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Problem is an RFC 9457 problem document with Keel's stable code.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   Code   `json:"code"`
}

// FromError is the one mapping from Go errors to problems. Details of
// internal errors are not exposed (they are logged by the caller).
func FromError(err error) *Problem {
	var modErr *module.Error
	if errors.As(err, &modErr) {
		return moduleProblem(modErr)
	}
	code, detail := classify(err)
	c := Catalogue[code]
	return &Problem{Type: "urn:keel:problem:" + string(code), Title: c.Title, Status: c.Status, Detail: detail, Code: code}
}

// moduleProblem keeps a module's own code and status; a code from the
// catalogue keeps the catalogue's status, so one code never means two.
func moduleProblem(e *module.Error) *Problem {
	status, title := e.Status, http.StatusText(e.Status)
	if c, ok := Catalogue[Code(e.Code)]; ok {
		status, title = c.Status, c.Title
	}
	if status < 400 || status > 599 {
		status, title = http.StatusInternalServerError, Catalogue[CodeInternal].Title
	}
	return &Problem{Type: "urn:keel:problem:" + e.Code, Title: title, Status: status, Detail: e.Detail, Code: Code(e.Code)}
}

func classify(err error) (Code, string) {
	var apiErr *Error
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &apiErr):
		return apiErr.Code, apiErr.Detail
	case errors.As(err, &tooLarge):
		return CodeBodyTooLarge, fmt.Sprintf("bodies are limited to %d bytes", tooLarge.Limit)
	case errors.Is(err, auth.ErrUnauthenticated):
		return CodeUnauthenticated, "send Authorization: Bearer <token>"
	case errors.Is(err, keeltype.ErrNotFound):
		return CodeNotFound, err.Error()
	case errors.Is(err, keeltype.ErrInvalidArgument):
		return CodeInvalidArgument, err.Error()
	case errors.Is(err, keeltype.ErrStaleFence):
		return CodeStaleFence, err.Error()
	case errors.Is(err, keeltype.ErrInvalidState):
		return CodeInvalidState, err.Error()
	}
	return CodeInternal, ""
}

// WriteProblem writes err as application/problem+json, logging internal
// errors (never request bodies or credentials).
func WriteProblem(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	p := FromError(err)
	if p.Code == CodeInternal && logger != nil {
		logger.Error("admin API request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}
