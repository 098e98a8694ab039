package servertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/keelwork/keel/server/api"
)

// Good is a route's well-formed request: concrete path values (by
// parameter name) and a body that would be accepted. The bad-input walk
// spoils one part at a time.
type Good struct {
	Params map[string]string
	Body   map[string]any
}

// BadStrings are the catalogue of bad text: NULs, a control character,
// invalid UTF-8 (sent as raw bytes) and an over-long string.
var BadStrings = []string{"\x00\x00\x00\x00\x00", "abc\x01defgh", "\xff\xfe\xfd\xfc\xfb", strings.Repeat("长", 5000)}

// BadNumbers are the catalogue of bad numbers (as JSON text): negative,
// too large for any rate or count, beyond int64, beyond float64. A field
// whose good value is a Go int is a whole-number domain and also gets 0.5.
var BadNumbers = []string{"-1", "1e23", "9223372036854775808", "1e400"}

// BadBodies are bodies no route accepts.
var BadBodies = []string{"null", "[]", `"text"`, "1", "true", `{"no_such_field":1}`, "{", `{"a":1}{"b":2}`}

// BadPathValues replace an id in a path.
var BadPathValues = []string{"-1", "0", "9223372036854775808", "1.5", "%00", "00001"}

// BadQueries are sent to every GET route.
var BadQueries = []string{"page=-1", "page=0", "page=9223372036854775807", "limit=1000000", "limit=0", "limit=-1",
	"after=-1", "cursor=-1", "size=-1", "size=1000000", "no_such_param=1"}

var paramRE = regexp.MustCompile(`\{([a-z_]+)\}`)

// WalkBadInput sends the catalogue of bad input to every route of h (as
// the router lists them) with token (an admin's), and fails t unless each
// answer is a 4xx problem+json and digest (of every table) is the same
// after the walk as before. good gives each route's well-formed request;
// a route without one still gets bad bodies, paths and queries. It
// returns the number of requests sent.
func WalkBadInput(t *testing.T, h *api.Handler, token string, digest func() string, good func(method, pattern string) Good) int {
	t.Helper()
	var routes [][2]string
	_ = chi.Walk(h.Router(), func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routes = append(routes, [2]string{method, pattern})
		return nil
	})
	sort.Slice(routes, func(i, j int) bool { return routes[i][1]+routes[i][0] < routes[j][1]+routes[j][0] })
	// The digest reads every table (well over a hundred with every module),
	// so it is taken once per route, after all of that route's bad
	// requests, not after each: a change is still caught, and named by the
	// route and the requests it was sent, at a tenth of the queries.
	before := digest()
	sent := 0
	var sentHere []string
	send := func(method, path, body, what string) {
		sent++
		sentHere = append(sentHere, what)
		status, ctype, raw := rawCall(h, method, path, body, token)
		var p api.Problem
		_ = json.Unmarshal(raw, &p)
		if status < 400 || status > 499 || ctype != "application/problem+json" || p.Code == "" || p.Status != status {
			t.Errorf("%s %s (%s): %d %s %.300s", method, path, what, status, ctype, raw)
		}
	}
	for _, rt := range routes {
		method, pattern := rt[0], rt[1]
		sentHere = sentHere[:0]
		walkRoute(method, pattern, good(method, pattern), send)
		if after := digest(); after != before {
			t.Errorf("%s %s: one of its %d bad requests (%s) changed the tables: %s", method, pattern, len(sentHere),
				strings.Join(sentHere, "; "), diff(before, after))
			before = after
		}
	}
	return sent
}

// walkRoute sends one route's share of the catalogue: bad path values,
// bad queries (GET) or bad bodies and, field by field, bad values.
func walkRoute(method, pattern string, g Good, send func(method, path, body, what string)) {
	path := fill(pattern, g.Params)
	for _, m := range paramRE.FindAllStringSubmatch(pattern, -1) {
		if m[1] == "key" || m[1] == "name" || m[1] == "user" {
			for _, v := range []string{"%00", "%FF%FE", strings.Repeat("k", 300)} {
				send(method, fill(pattern, with(g.Params, m[1], v)), goodBody(method, g.Body), "path "+m[1]+"="+v)
			}
			continue
		}
		for _, v := range BadPathValues {
			send(method, fill(pattern, with(g.Params, m[1], v)), goodBody(method, g.Body), "path "+m[1]+"="+v)
		}
	}
	if method == http.MethodGet {
		for _, q := range BadQueries {
			send(method, path+"?"+q, "", "query "+q)
		}
		return
	}
	for _, b := range BadBodies {
		send(method, path, b, "body "+b)
	}
	for _, field := range sortedKeys(g.Body) {
		for _, bad := range badValues(field, g.Body[field]) {
			send(method, path, spoil(g.Body, field, bad), fmt.Sprintf("%s=%.40s", field, bad))
		}
	}
}

func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{}
	for a, b := range m {
		out[a] = b
	}
	out[k] = v
	return out
}

func fill(pattern string, params map[string]string) string {
	return paramRE.ReplaceAllStringFunc(pattern, func(s string) string {
		if v, ok := params[s[1:len(s)-1]]; ok {
			return v
		}
		return "999999"
	})
}

func goodBody(method string, body map[string]any) string {
	if method == http.MethodGet {
		return ""
	}
	if body == nil {
		return "{}"
	}
	b, _ := json.Marshal(body)
	return string(b)
}

func sortedKeys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// badValues are the JSON texts that spoil a field of the good body's kind.
func badValues(field string, v any) []string {
	var out []string
	switch v.(type) {
	case string:
		for _, s := range BadStrings {
			out = append(out, quoteRaw(s))
		}
		if field == "reason" || strings.HasSuffix(field, "_reason") {
			out = append(out, `"     "`, `"abc"`)
		}
		out = append(out, "123")
	case float64:
		out = append(out, BadNumbers...)
		out = append(out, `"1"`)
	case int, int64:
		out = append(out, BadNumbers...)
		out = append(out, `"1"`, "0.5")
	case []any, []int64:
		out = append(out, "[-1]", "[1e400]", `"x"`)
	}
	return out
}

// quoteRaw quotes s as a JSON string but keeps invalid UTF-8 bytes as
// they are (encoding/json would replace them).
func quoteRaw(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// spoil returns body with field set to the raw JSON text bad.
func spoil(body map[string]any, field, bad string) string {
	parts := []string{}
	for _, k := range sortedKeys(body) {
		if k == field {
			parts = append(parts, fmt.Sprintf("%q:%s", k, bad))
			continue
		}
		b, _ := json.Marshal(body[k])
		parts = append(parts, fmt.Sprintf("%q:%s", k, b))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func rawCall(h http.Handler, method, path, body, token string) (int, string, []byte) {
	r := httptest.NewRequest(method, "http://keel.test"+path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, rec.Header().Get("Content-Type"), b
}

// diff names the tables whose digests differ ("table=digest" lines).
func diff(before, after string) string {
	b := map[string]bool{}
	for _, l := range strings.Split(before, "\n") {
		b[l] = true
	}
	var out []string
	for _, l := range strings.Split(after, "\n") {
		if !b[l] {
			out = append(out, strings.SplitN(l, "=", 2)[0])
		}
	}
	return strings.Join(out, ", ")
}
