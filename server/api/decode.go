package api

import (
	"net/http"
	"strings"

	"github.com/keelwork/keel/module/web"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = web.MaxBodyBytes

// Paging bounds: limit is 1..MaxLimit, DefaultLimit when absent (the one
// paging rule of web).
const (
	DefaultLimit = web.DefaultLimit
	MaxLimit     = web.MaxLimit
)

// decodeBody reads a JSON object into v strictly (web.Decode); with
// optional, an empty body leaves v untouched, but null is still refused.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	if optional {
		return web.DecodeOptional(w, r, v)
	}
	return web.Decode(w, r, v)
}

// reasonBody is the body of every control action: an optional reason.
type reasonBody struct {
	Reason string `json:"reason"`
}

// readReason reads an optional body with an optional reason; a reason
// that is given obeys the one reason rule (web.Reason).
func readReason(w http.ResponseWriter, r *http.Request) (string, error) {
	var b reasonBody
	if err := decodeBody(w, r, &b, true); err != nil {
		return "", err
	}
	return web.Reason(b.Reason, false)
}

// query reads and validates query parameters; the first problem wins.
type query struct {
	*web.Query
	r *http.Request
}

func newQuery(r *http.Request, known ...string) *query {
	return &query{Query: web.NewQuery(r, known...), r: r}
}

func (q *query) fail(code Code, format string, args ...any) { q.Fail(Errorf(code, format, args...)) }

func (q *query) limit() int { return q.Limit(DefaultLimit) }

// names reads a comma-separated list of queue/kind names.
func (q *query) names(param string) []string {
	var out []string
	for _, v := range q.Values(param) {
		for _, s := range strings.Split(v, ",") {
			if _, err := web.Identifier(param, s); err != nil {
				q.Fail(err)
				return nil
			}
			out = append(out, s)
		}
	}
	return out
}

// text reads a free filter value (see web.OptionalText).
func (q *query) text(param string, max int) string { return q.Text(param, max) }

func (q *query) boolean(param string) bool { return q.Bool(param) }

// cursorParam is the value of after= (or its older name cursor=).
func (q *query) cursorParam() string {
	if s := q.Get("after"); s != "" {
		return s
	}
	return q.Get("cursor")
}

// Cursors are opaque to clients: a kind letter and the position.
func encodeCursor(kind, pos string) string { return web.Cursor(kind, pos) }

func (q *query) cursor(kind string) (string, bool) {
	s := q.cursorParam()
	if s == "" {
		return "", false
	}
	pos, ok := web.DecodeCursor(kind, s)
	if !ok {
		q.fail(CodeInvalidCursor, "after is not a cursor this list issued; pass next_cursor of the previous page")
		return "", false
	}
	return pos, true
}

func (q *query) idCursor(kind string) int64 {
	pos, ok := q.cursor(kind)
	if !ok {
		return 0
	}
	id, err := parsePositive(pos)
	if err != nil {
		q.fail(CodeInvalidCursor, "after is not a cursor this list issued; pass next_cursor of the previous page")
		return 0
	}
	return id
}

func pathID(r *http.Request, s string) (int64, error) {
	id, err := parsePositive(s)
	if err != nil {
		return 0, Errorf(CodeInvalidArgument, "id must be a positive integer")
	}
	return id, nil
}

func parsePositive(s string) (int64, error) {
	r := &http.Request{}
	r.SetPathValue("n", s)
	return web.PathID(r, "n")
}
