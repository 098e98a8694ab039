package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/keelwork/keel/module/web"
)

func code(err error) string {
	if e, ok := web.As(err); ok {
		return e.Code
	}
	if err == nil {
		return ""
	}
	return "not a problem: " + err.Error()
}

// TestDecodeRefusesNonObjects: a required body is an object; null, arrays
// and scalars are refused, and an optional body that is sent obeys the
// same rule.
func TestDecodeRefusesNonObjects(t *testing.T) {
	for _, body := range []string{"null", " null ", "[]", "1", `"x"`, "true"} {
		for _, optional := range []bool{false, true} {
			r := httptest.NewRequest("POST", "/", strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			var v struct{ Reason string }
			decode := web.Decode
			if optional {
				decode = web.DecodeOptional
			}
			if err := decode(httptest.NewRecorder(), r, &v); code(err) == "" {
				t.Errorf("body %q (optional %v) accepted", body, optional)
			}
		}
	}
	r := httptest.NewRequest("POST", "/", strings.NewReader("{\"reason\":\"ab\xffcdef\"}"))
	r.Header.Set("Content-Type", "application/json")
	var bad struct{ Reason string }
	if err := web.Decode(httptest.NewRecorder(), r, &bad); code(err) != web.CodeInvalidJSON {
		t.Errorf("invalid UTF-8 body: %v (reason %q)", err, bad.Reason)
	}
	r = httptest.NewRequest("POST", "/", strings.NewReader(""))
	var v struct{ Reason string }
	if err := web.DecodeOptional(httptest.NewRecorder(), r, &v); err != nil {
		t.Errorf("empty optional body: %v", err)
	}
	if err := web.Decode(httptest.NewRecorder(), httptest.NewRequest("POST", "/", strings.NewReader("")), &v); code(err) != web.CodeInvalidJSON {
		t.Errorf("empty required body: %v", err)
	}
}

// TestReasonRule: one rule for every reason.
func TestReasonRule(t *testing.T) {
	bad := []string{"     ", "\x00\x00\x00\x00\x00", "abc\x00defgh", "ab\xffcdefg", "abcd", " ab  cd ",
		"abc\ndefgh", strings.Repeat("x", web.MaxReasonRunes+1), "a\u200bb\u200bc\u200bd"}
	for _, s := range bad {
		if _, err := web.Reason(s, true); code(err) != web.CodeInvalidArgument {
			t.Errorf("reason %q: %v, want invalid_argument", s, err)
		}
	}
	for _, s := range []string{"ticket 42", "  磁盘满了，重投  ", "abcde"} {
		got, err := web.Reason(s, true)
		if err != nil || got != strings.TrimSpace(s) {
			t.Errorf("reason %q: %q %v", s, got, err)
		}
	}
	if got, err := web.Reason("", false); err != nil || got != "" {
		t.Errorf("optional empty reason: %q %v", got, err)
	}
	if _, err := web.Reason("     ", false); err == nil {
		t.Error("optional reason of five spaces accepted")
	}
	if _, err := web.Reason("\x00", false); err == nil {
		t.Error("optional NUL reason accepted")
	}
	for _, s := range []string{"", "   ", "\x00\x00", "a\xffb"} {
		if _, err := web.Name("name", s, 0); err == nil {
			t.Errorf("name %q accepted", s)
		}
		if _, err := web.Pattern("pattern", s); err == nil {
			t.Errorf("pattern %q accepted", s)
		}
	}
}

// TestPagingRule: out-of-range pages, limits and cursors are refused.
func TestPagingRule(t *testing.T) {
	for _, qs := range []string{"page=-1", "page=0", "page=9223372036854775807", "page=x", "limit=0",
		"limit=1000000", "limit=-5", "after=-1", "after=abc", "page=200000&limit=10", "unknown=1"} {
		r := httptest.NewRequest("GET", "/?"+qs, nil)
		q := web.NewQuery(r, "page", "limit", "after")
		limit := q.Limit(20)
		q.Page("page", limit)
		q.AfterID("x")
		if code(q.Err) != web.CodeInvalidArgument && code(q.Err) != web.CodeInvalidCursor {
			t.Errorf("%s: %v", qs, q.Err)
		}
	}
	r := httptest.NewRequest("GET", "/?after="+web.IDCursor("x", 42)+"&limit=1000&page=3", nil)
	q := web.NewQuery(r, "page", "limit", "after")
	if id, l, p := q.AfterID("x"), q.Limit(20), q.Page("page", 1000); id != 42 || l != 1000 || p != 3 || q.Err != nil {
		t.Errorf("good query: %d %d %d %v", id, l, p, q.Err)
	}
	pr := &http.Request{}
	for _, s := range []string{"-1", "0", "01", "1e3", "99999999999999999999"} {
		pr.SetPathValue("id", s)
		if _, err := web.PathID(pr, "id"); err == nil {
			t.Errorf("path id %q accepted", s)
		}
	}
}
