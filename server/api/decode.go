package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 1 << 20

// Paging bounds: limit is 1..MaxLimit, DefaultLimit when absent.
const (
	DefaultLimit = 50
	MaxLimit     = 1000
)

// maxReason bounds the free-text reason of control actions.
const maxReason = 1000

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_.:\-]{1,128}$`)

// decodeBody reads a JSON object into v strictly: application/json only,
// at most MaxBodyBytes, no unknown fields, no trailing data. With optional,
// an empty body leaves v untouched.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return err // *http.MaxBytesError → 413
	}
	if len(strings.TrimSpace(string(raw))) == 0 {
		if optional {
			return nil
		}
		return Errorf(CodeInvalidJSON, "a JSON body is required")
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return Errorf(CodeUnsupportedMedia, "send Content-Type: application/json")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonProblem(err)
	}
	if dec.More() {
		return Errorf(CodeInvalidJSON, "trailing data after the JSON object")
	}
	return nil
}

func jsonProblem(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return Errorf(CodeInvalidJSON, "body is not valid JSON")
	case errors.As(err, &typ):
		return Errorf(CodeInvalidArgument, "field %q must be %s, got %s", typ.Field, typ.Type, typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return Errorf(CodeUnknownField, "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return Errorf(CodeInvalidJSON, "body is not a valid JSON object")
}

// reasonBody is the body of every control action: an optional reason.
type reasonBody struct {
	Reason string `json:"reason"`
}

func readReason(w http.ResponseWriter, r *http.Request) (string, error) {
	var b reasonBody
	if err := decodeBody(w, r, &b, true); err != nil {
		return "", err
	}
	return b.Reason, checkReason(b.Reason)
}

func checkReason(s string) error {
	if len(s) > maxReason {
		return Errorf(CodeInvalidArgument, "reason is longer than %d bytes", maxReason)
	}
	return nil
}

// query reads and validates query parameters; the first problem wins.
type query struct {
	r   *http.Request
	err error
}

func (q *query) fail(code Code, format string, args ...any) {
	if q.err == nil {
		q.err = Errorf(code, format, args...)
	}
}

func (q *query) known(names ...string) {
	if _, err := url.ParseQuery(q.r.URL.RawQuery); err != nil {
		q.fail(CodeInvalidArgument, "query string is malformed")
	}
	for k := range q.r.URL.Query() {
		ok := false
		for _, n := range names {
			ok = ok || n == k
		}
		if !ok {
			q.fail(CodeInvalidArgument, "unknown query parameter %q", k)
		}
	}
}

func (q *query) limit() int {
	s := q.r.URL.Query().Get("limit")
	if s == "" {
		return DefaultLimit
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxLimit {
		q.fail(CodeInvalidArgument, "limit must be an integer 1..%d", MaxLimit)
		return DefaultLimit
	}
	return n
}

// names reads a comma-separated list of queue/kind names.
func (q *query) names(param string) []string {
	var out []string
	for _, v := range q.r.URL.Query()[param] {
		for _, s := range strings.Split(v, ",") {
			if !namePattern.MatchString(s) {
				q.fail(CodeInvalidArgument, "%s must be names of 1-128 of A-Z a-z 0-9 _ . : -", param)
				return nil
			}
			out = append(out, s)
		}
	}
	return out
}

// text reads a free filter value: printable, at most max bytes.
func (q *query) text(param string, max int) string {
	s := q.r.URL.Query().Get(param)
	if len(s) > max || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		q.fail(CodeInvalidArgument, "%s must be printable text of at most %d bytes", param, max)
		return ""
	}
	return s
}

func (q *query) boolean(param string) bool {
	switch q.r.URL.Query().Get(param) {
	case "", "false", "0":
		return false
	case "true", "1":
		return true
	}
	q.fail(CodeInvalidArgument, "%s must be true or false", param)
	return false
}

// Cursors are opaque to clients: a kind letter and the position, base64url.
func encodeCursor(kind, pos string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + pos))
}

func (q *query) cursor(kind string) (string, bool) {
	s := q.r.URL.Query().Get("cursor")
	if s == "" {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	pos, ok := strings.CutPrefix(string(raw), kind+":")
	if err != nil || !ok || len(s) > 700 {
		q.fail(CodeInvalidCursor, "cursor is not one this endpoint issued")
		return "", false
	}
	return pos, true
}

func (q *query) idCursor(kind string) int64 {
	pos, ok := q.cursor(kind)
	if !ok {
		return 0
	}
	id, err := strconv.ParseInt(pos, 10, 64)
	if err != nil || id < 1 {
		q.fail(CodeInvalidCursor, "cursor is not one this endpoint issued")
		return 0
	}
	return id
}

func pathID(r *http.Request, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, Errorf(CodeInvalidArgument, "id must be a positive integer")
	}
	return id, nil
}
