package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/server/auth"
)

// Code is a stable problem code; clients switch on it, never on messages.
type Code string

// The catalogue of problem codes, each with its one HTTP status (the
// catalogue itself is web's, which modules extend).
const (
	CodeInvalidArgument  Code = web.CodeInvalidArgument
	CodeInvalidJSON      Code = web.CodeInvalidJSON
	CodeUnknownField     Code = web.CodeUnknownField
	CodeInvalidCursor    Code = web.CodeInvalidCursor
	CodeBodyTooLarge     Code = web.CodeBodyTooLarge
	CodeUnsupportedMedia Code = web.CodeUnsupportedMedia
	CodeUnauthenticated  Code = web.CodeUnauthenticated
	CodeForbidden        Code = web.CodeForbidden
	CodeCSRF             Code = web.CodeCSRF
	CodeNotFound         Code = web.CodeNotFound
	CodeMethodNotAllowed Code = web.CodeMethodNotAllowed
	CodeInvalidState     Code = web.CodeInvalidState
	CodeStaleFence       Code = web.CodeStaleFence
	CodeConflict         Code = web.CodeConflict
	CodeUnavailable      Code = web.CodeUnavailable
	CodeInternal         Code = web.CodeInternal
)

// Catalogue returns a code's HTTP status and title.
func Catalogue(code Code) web.Entry {
	e, ok := web.Lookup(string(code))
	if !ok {
		e, _ = web.Lookup(web.CodeInternal)
	}
	return e
}

// Error is an error with a problem code, raised by the API's own checks.
type Error = web.Error

// Errorf builds an *Error with the code's catalogued status.
func Errorf(code Code, format string, args ...any) error {
	return web.Problem(string(code), format, args...)
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
// internal errors are not exposed (they are logged by the caller), and no
// detail carries a driver's prefix.
func FromError(err error) *Problem {
	if e, ok := web.As(err); ok {
		return webProblem(e)
	}
	code, detail := classify(err)
	c := Catalogue(code)
	return &Problem{Type: "urn:keel:problem:" + string(code), Title: c.Title, Status: c.Status, Detail: detail, Code: code}
}

// webProblem keeps a handler's own code and status; a catalogued code
// keeps the catalogue's status, so one code never means two.
func webProblem(e *web.Error) *Problem {
	status, title := e.Status, http.StatusText(e.Status)
	if c, ok := web.Lookup(e.Code); ok {
		status, title = c.Status, c.Title
	}
	if status < 400 || status > 599 {
		status, title = http.StatusInternalServerError, Catalogue(CodeInternal).Title
	}
	return &Problem{Type: "urn:keel:problem:" + e.Code, Title: title, Status: status, Detail: cleanDetail(e.Detail), Code: Code(e.Code)}
}

func classify(err error) (Code, string) {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return CodeBodyTooLarge, fmt.Sprintf("bodies are limited to %d bytes", tooLarge.Limit)
	case errors.Is(err, auth.ErrUnauthenticated):
		return CodeUnauthenticated, unauthenticatedDetail(err)
	case errors.Is(err, keeltype.ErrNotFound):
		return CodeNotFound, cleanDetail(err.Error())
	case errors.Is(err, keeltype.ErrInvalidArgument):
		return CodeInvalidArgument, cleanDetail(err.Error())
	case errors.Is(err, keeltype.ErrStaleFence):
		return CodeStaleFence, cleanDetail(err.Error())
	case errors.Is(err, keeltype.ErrInvalidState):
		return CodeInvalidState, cleanDetail(err.Error())
	}
	if code, detail, ok := databaseProblem(err); ok {
		return code, detail
	}
	return CodeInternal, ""
}

// unauthenticatedDetail tells a caller that sent no token how to send one,
// and one that sent a wrong token that it is wrong.
func unauthenticatedDetail(err error) string {
	if errors.Is(err, errTokenRejected) {
		return "the token sent was not accepted: it is unknown, revoked or expired"
	}
	return "this route needs a token: send Authorization: Bearer <token>"
}

// errTokenRejected marks a token that was sent but is not accepted.
var errTokenRejected = errors.New("token rejected")

// RejectedToken wraps an authentication failure of a token that was sent
// (as opposed to none sent), so the problem says so.
func RejectedToken(err error) error {
	if errors.Is(err, auth.ErrUnauthenticated) {
		return fmt.Errorf("%w: %w", errTokenRejected, err)
	}
	return err
}

// driverPrefixes are package prefixes of the engine's and drivers' error
// messages: internals a person has no use for.
var driverPrefixes = []string{"keelsqlite: ", "keelpgx: ", "keeldriver: ", "keel: "}

// cleanDetail drops driver prefixes from a message ("keelsqlite: getting
// job: job 9: keel: not found" becomes "getting job: job 9: not found").
func cleanDetail(s string) string {
	for _, p := range driverPrefixes {
		s = strings.ReplaceAll(s, p, "")
	}
	return s
}

// databaseProblem maps what a database refuses (a constraint, a value the
// column cannot hold) to 4xx, and an unreachable or unmigrated database
// to 503 with what to do, without importing a driver: PostgreSQL errors
// carry SQLSTATE, SQLite errors a message.
func databaseProblem(err error) (Code, string, bool) {
	var st interface{ SQLState() string }
	if errors.As(err, &st) {
		switch s := st.SQLState(); {
		case s == "23505":
			return CodeConflict, "a record with the same key already exists", true
		case s == "23503":
			return CodeInvalidArgument, "a referenced record does not exist", true
		case strings.HasPrefix(s, "23"):
			return CodeInvalidArgument, "a value is out of its allowed range", true
		case strings.HasPrefix(s, "22"):
			return CodeInvalidArgument, "a value cannot be stored (out of range, or characters the database refuses)", true
		case s == "42P01" || s == "3F000":
			return CodeUnavailable, "the database is not migrated: run keel migrate up", true
		case strings.HasPrefix(s, "08") || strings.HasPrefix(s, "57P"):
			return CodeUnavailable, "the database is unreachable", true
		}
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "UNIQUE constraint failed"):
		return CodeConflict, "a record with the same key already exists", true
	case strings.Contains(msg, "FOREIGN KEY constraint failed"):
		return CodeInvalidArgument, "a referenced record does not exist", true
	case strings.Contains(msg, "constraint failed"):
		return CodeInvalidArgument, "a value is out of its allowed range", true
	case strings.Contains(msg, "no such table"):
		return CodeUnavailable, "the database is not migrated: run keel migrate up", true
	case strings.Contains(msg, "connection refused"), strings.Contains(msg, "failed to connect"),
		strings.Contains(msg, "no such host"), strings.Contains(msg, "i/o timeout"):
		return CodeUnavailable, "the database is unreachable", true
	}
	return "", "", false
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
