package reservation

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/web"
)

// Lists answer in pages: data in order, next_cursor set when more follow
// (the same shape as the engine's admin API).
type listPage[T any] struct {
	Data       []T    `json:"data"`
	NextCursor string `json:"next_cursor,omitempty"`
}

func page[T any](data []T, next string) listPage[T] {
	if data == nil {
		data = []T{}
	}
	return listPage[T]{Data: data, NextCursor: next}
}

const (
	defaultLimit = web.DefaultLimit
	maxLimit     = web.MaxLimit
	cursorPrefix = "rsv:"
)

// encodeCursor makes the opaque cursor of the page after id.
func encodeCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatInt(id, 10)))
}

// decodeCursor reads a cursor made by encodeCursor.
func decodeCursor(s string) (int64, bool) {
	if len(s) > 64 {
		return 0, false
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return 0, false
	}
	pos, ok := strings.CutPrefix(string(raw), cursorPrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(pos, 10, 64)
	if err != nil || id < 1 || strconv.FormatInt(id, 10) != pos {
		return 0, false
	}
	return id, true
}

// query reads and validates query parameters; the first problem wins.
type query struct {
	r   *http.Request
	err error
}

func newQuery(r *http.Request, known ...string) *query {
	q := &query{r: r}
	for k := range r.URL.Query() {
		found := false
		for _, n := range known {
			found = found || n == k
		}
		if !found {
			q.fail("unknown query parameter %q", k)
		}
	}
	return q
}

func knownParams(r *http.Request) error { return newQuery(r).err }

func (q *query) fail(format string, args ...any) {
	if q.err == nil {
		q.err = module.Invalid(format, args...)
	}
}

func (q *query) text(name string, max int) string {
	s, err := web.OptionalText(name, q.r.URL.Query().Get(name), max)
	if err != nil && q.err == nil {
		q.err = err
	}
	return s
}

func (q *query) id(name string) int64 {
	s := q.r.URL.Query().Get(name)
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		q.fail("%s: a positive integer", name)
		return 0
	}
	return n
}

func (q *query) bool(name string) bool {
	s := q.r.URL.Query().Get(name)
	if s == "" {
		return false
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		q.fail("%s: true or false", name)
	}
	return b
}

func (q *query) time(name string, def time.Time) time.Time {
	s := q.r.URL.Query().Get(name)
	if s == "" {
		return def
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		q.fail("%s: an RFC 3339 time such as 2030-01-07T10:00:00+08:00", name)
		return def
	}
	return t.UTC()
}

func (q *query) limit() int {
	s := q.r.URL.Query().Get("limit")
	if s == "" {
		return defaultLimit
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxLimit {
		q.fail("limit: an integer 1..%d", maxLimit)
		return defaultLimit
	}
	return n
}

// cursor reads after= (the one paging parameter) or its older name
// cursor=.
func (q *query) cursor() int64 {
	s := q.r.URL.Query().Get("after")
	if s == "" {
		s = q.r.URL.Query().Get("cursor")
	}
	if s == "" {
		return 0
	}
	id, ok := decodeCursor(s)
	if !ok && q.err == nil {
		q.err = module.Errorf(http.StatusBadRequest, "invalid_cursor", "cursor is not one this endpoint issued")
	}
	return id
}

func pathInt(r *http.Request, name string) (int64, error) { return web.PathID(r, name) }
