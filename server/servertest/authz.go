package servertest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/keelwork/keel/server/api"
	"github.com/keelwork/keel/server/auth"
)

// Request is what the authorization walk sends to one route.
type Request struct {
	Path, Body string
}

// WalkAuthorization calls every route of h (the engine's and the modules',
// as the router lists them, so a new route cannot be forgotten) as no one, a
// bogus token and each role, and fails t unless exactly the roles at or above
// the route's declared role get past authorization. prepare turns a route
// pattern into a concrete request (ids of existing rows, a valid body).
func WalkAuthorization(t *testing.T, h *api.Handler, tokens map[auth.Role]string, prepare func(method, pattern string) Request) int {
	t.Helper()
	var routes [][2]string
	err := chi.Walk(h.Router(), func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routes = append(routes, [2]string{method, pattern})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	idents := []struct {
		name, token string
		role        auth.Role
	}{{"none", "", auth.RoleNone}, {"bogus", "keel_not-a-token", auth.RoleNone},
		{"viewer", tokens[auth.RoleViewer], auth.RoleViewer},
		{"operator", tokens[auth.RoleOperator], auth.RoleOperator}, {"admin", tokens[auth.RoleAdmin], auth.RoleAdmin}}
	for _, rt := range routes {
		method, pattern := rt[0], rt[1]
		need, ok := h.RequiredRole(method, pattern)
		if !ok {
			t.Errorf("%s %s declares no role", method, pattern)
			continue
		}
		for _, id := range idents {
			req := prepare(method, pattern)
			status, code := callAPI(h, method, req, id.token)
			switch {
			case id.role == auth.RoleNone:
				if status != 401 || code != string(api.CodeUnauthenticated) {
					t.Errorf("%s %s as %s: status %d %s, want 401", method, pattern, id.name, status, code)
				}
			case !id.role.Allows(need):
				if status != 403 || code != string(api.CodeForbidden) {
					t.Errorf("%s %s as %s: status %d %s, want 403", method, pattern, id.name, status, code)
				}
			default:
				if status == 401 || status == 403 || status >= 500 {
					t.Errorf("%s %s as %s (needs %s): status %d %s", method, pattern, id.name, need, status, code)
				}
			}
		}
	}
	return len(routes)
}

// callAPI sends one request and returns its status and problem code.
func callAPI(h http.Handler, method string, req Request, token string) (int, string) {
	r := httptest.NewRequest(method, req.Path, strings.NewReader(req.Body))
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	r.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	var p struct{ Code string }
	if rec.Header().Get("Content-Type") == "application/problem+json" {
		b, _ := io.ReadAll(rec.Result().Body)
		_ = json.Unmarshal(b, &p)
	}
	return rec.Code, p.Code
}
