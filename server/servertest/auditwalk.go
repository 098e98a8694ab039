package servertest

import (
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/keelwork/keel/server/api"
)

// AuditCase is how the audit walk calls one mutating route successfully:
// Setup (optional) brings the state the call needs, Request is the call.
// ReadOnly marks a POST that changes nothing (a preview), which must then
// leave no audit entry.
type AuditCase struct {
	Setup    func()
	Request  func() Request
	ReadOnly bool
	// Want, when set, is the number of entries the call leaves (a call
	// acting on several records audits each).
	Want int
}

// WalkAudit calls every mutating route of h (every method but GET, as the
// router lists them, so a new route cannot be forgotten) through its case
// and fails t unless each answers 2xx and leaves exactly one new audit
// entry (none for a ReadOnly case). audits counts the audit log's rows.
// With only, the walk covers the routes only accepts (a module's).
func WalkAudit(t *testing.T, h *api.Handler, token string, audits func() int, cases map[string]AuditCase, only ...func(method, pattern string) bool) int {
	t.Helper()
	n := 0
	_ = chi.Walk(h.Router(), func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if method == http.MethodGet || method == http.MethodHead {
			return nil
		}
		for _, o := range only {
			if !o(method, pattern) {
				return nil
			}
		}
		key := method + " " + pattern
		c, ok := cases[key]
		if !ok {
			t.Errorf("%s: no audit case: say how to call it successfully", key)
			return nil
		}
		if c.Setup != nil {
			c.Setup()
		}
		req := c.Request()
		before := audits()
		status, _, body := rawCall(h, method, req.Path, req.Body, token)
		after := audits()
		want := 1
		if c.ReadOnly {
			want = 0
		} else if c.Want > 0 {
			want = c.Want
		}
		switch {
		case status < 200 || status > 299:
			t.Errorf("%s (%s): %d %.300s", key, req.Path, status, body)
		case after-before != want:
			t.Errorf("%s (%s): %d new audit entries, want %d", key, req.Path, after-before, want)
		}
		n++
		return nil
	})
	return n
}
