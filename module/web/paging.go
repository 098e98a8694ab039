package web

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The one paging rule, for every list (API, module routes, CLI):
//
//   - limit is an integer 1..MaxLimit; absent, the list's default.
//   - Cursor lists take after=<next_cursor of the previous page>; the CLI
//     flag is --after. A cursor the endpoint did not issue is refused.
//   - Numbered lists take page=1..MaxPage (and their size as limit);
//     page*limit beyond MaxOffset is refused, since such an offset is
//     never a page a person wants.
//
// Out-of-range values are refused with invalid_argument, never clamped.
const (
	DefaultLimit = 50
	MaxLimit     = 1000
	MaxPage      = 100000
	MaxOffset    = 1_000_000
)

// Query reads and validates query parameters; the first problem wins.
type Query struct {
	r   *http.Request
	Err error
}

// NewQuery starts reading r's query, refusing parameters not in known.
func NewQuery(r *http.Request, known ...string) *Query {
	q := &Query{r: r}
	vals, err := parseQuery(r)
	if err != nil {
		q.Fail(Invalid("the query string is malformed"))
		return q
	}
	for k := range vals {
		found := false
		for _, n := range known {
			found = found || n == k
		}
		if !found {
			q.Fail(Invalid("unknown query parameter %q", k))
		}
	}
	return q
}

func parseQuery(r *http.Request) (map[string][]string, error) {
	v, err := urlParse(r.URL.RawQuery)
	return v, err
}

// Fail records err unless an earlier problem was recorded.
func (q *Query) Fail(err error) {
	if q.Err == nil {
		q.Err = err
	}
}

// Get returns the parameter's value.
func (q *Query) Get(name string) string { return q.r.URL.Query().Get(name) }

// Values returns every value of the parameter.
func (q *Query) Values(name string) []string { return q.r.URL.Query()[name] }

// Limit reads limit (1..MaxLimit, def when absent).
func (q *Query) Limit(def int) int {
	s := q.Get("limit")
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxLimit {
		q.Fail(Invalid("limit must be an integer 1..%d, got %q", MaxLimit, clip(s)))
		return def
	}
	return n
}

// Page reads page (1..MaxPage, 1 when absent) for a list of pages of size
// limit; page*limit beyond MaxOffset is refused.
func (q *Query) Page(param string, limit int) int {
	s := q.Get(param)
	if s == "" {
		return 1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxPage {
		q.Fail(Invalid("%s must be an integer 1..%d, got %q", param, MaxPage, clip(s)))
		return 1
	}
	if int64(n-1)*int64(limit) > MaxOffset {
		q.Fail(Invalid("%s %d of %d is beyond the last page a list serves (offset %d)", param, n, limit, MaxOffset))
		return 1
	}
	return n
}

// ID reads an optional positive integer parameter (0 when absent).
func (q *Query) ID(name string) int64 {
	s := q.Get(name)
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		q.Fail(Invalid("%s must be a positive integer, got %q", name, clip(s)))
		return 0
	}
	return n
}

// Bool reads an optional boolean parameter.
func (q *Query) Bool(name string) bool {
	switch q.Get(name) {
	case "", "false", "0":
		return false
	case "true", "1":
		return true
	}
	q.Fail(Invalid("%s must be true or false", name))
	return false
}

// Text reads optional free text (trimmed; see OptionalText).
func (q *Query) Text(name string, max int) string {
	s, err := OptionalText(name, q.Get(name), max)
	if err != nil {
		q.Fail(err)
	}
	return s
}

// After reads the after= cursor of kind (see Cursor); "" when absent.
func (q *Query) After(kind string) string {
	s := q.Get("after")
	if s == "" {
		return ""
	}
	pos, ok := DecodeCursor(kind, s)
	if !ok {
		q.Fail(Problem(CodeInvalidCursor, "after is not a cursor this list issued; pass next_cursor of the previous page"))
		return ""
	}
	return pos
}

// AfterID reads an after= cursor holding a positive id (0 when absent).
func (q *Query) AfterID(kind string) int64 {
	pos := q.After(kind)
	if pos == "" {
		return 0
	}
	id, err := strconv.ParseInt(pos, 10, 64)
	if err != nil || id < 1 || strconv.FormatInt(id, 10) != pos {
		q.Fail(Problem(CodeInvalidCursor, "after is not a cursor this list issued; pass next_cursor of the previous page"))
		return 0
	}
	return id
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Cursors are opaque: a kind and the position, base64url.
func Cursor(kind, pos string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + pos))
}

// IDCursor is the cursor of the page after id.
func IDCursor(kind string, id int64) string { return Cursor(kind, strconv.FormatInt(id, 10)) }

// DecodeCursor reads a cursor of kind made by Cursor.
func DecodeCursor(kind, s string) (string, bool) {
	if len(s) > 700 {
		return "", false
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return "", false
	}
	pos, ok := strings.CutPrefix(string(raw), kind+":")
	return pos, ok && pos != ""
}

// List is the one list envelope: Data in order, NextCursor set when more
// follow (cursor lists) or Total set (numbered lists).
type List[T any] struct {
	Data       []T    `json:"data"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// NewList builds a List, never with a null data array.
func NewList[T any](data []T, next string) List[T] {
	if data == nil {
		data = []T{}
	}
	return List[T]{Data: data, NextCursor: next}
}

// PathID reads a positive integer path parameter.
func PathID(r *http.Request, name string) (int64, error) {
	s := r.PathValue(name)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || strconv.FormatInt(n, 10) != s {
		return 0, Invalid("%s must be a positive integer, got %q", name, clip(s))
	}
	return n, nil
}

func urlParse(raw string) (map[string][]string, error) { return url.ParseQuery(raw) }
