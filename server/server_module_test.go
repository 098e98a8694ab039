package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

// TestModuleRoutes: a module's routes are served at their absolute paths
// (inside and outside /api/v1) behind tokens and roles, with the actor set
// and the module's problems as problem+json.
func TestModuleRoutes(t *testing.T) {
	e := servertest.SQLite(t)
	base := e.Start(t)
	cases := []struct {
		method, path, token, body string
		status                    int
		code                      string
	}{
		{"GET", "/api/v1/probe/things/7", "", "", 401, "unauthenticated"},
		{"GET", "/api/v1/probe/things/7", e.Tokens[auth.RoleViewer], "", 200, ""},
		{"GET", "/api/v1/probe/things/x", e.Tokens[auth.RoleViewer], "", 400, "invalid_argument"},
		{"GET", "/api/v1/probe/things/101", e.Tokens[auth.RoleViewer], "", 404, "probe_thing_not_found"},
		{"POST", "/admin/probe/things", e.Tokens[auth.RoleViewer], `{"name":"a"}`, 403, "forbidden"},
		{"POST", "/admin/probe/things", e.Tokens[auth.RoleOperator], `{"name":"a"}`, 201, ""},
		{"POST", "/admin/probe/things", e.Tokens[auth.RoleOperator], `{"name":"a","x":1}`, 400, "unknown_field"},
		{"POST", "/admin/probe/things", e.Tokens[auth.RoleOperator], `{"name":`, 400, "invalid_json"},
		{"POST", "/admin/probe/things", e.Tokens[auth.RoleOperator], `{"name":7}`, 400, "invalid_argument"},
		{"GET", "/admin/probe/things", e.Tokens[auth.RoleOperator], "", 405, "method_not_allowed"},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, base+c.path, strings.NewReader(c.body))
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s: status %d, want %d (%s)", c.method, c.path, resp.StatusCode, c.status, body)
			continue
		}
		if c.code == "" {
			continue
		}
		var p struct{ Code string }
		if resp.Header.Get("Content-Type") != "application/problem+json" || json.Unmarshal(body, &p) != nil || p.Code != c.code {
			t.Errorf("%s %s: %s %s, want problem code %s", c.method, c.path, resp.Header.Get("Content-Type"), body, c.code)
		}
	}
}

// TestModulePages: a module page renders inside the console layout with
// its navigation entry, knows the actor, and its form posts need the CSRF
// token and the role.
func TestModulePages(t *testing.T) {
	e := servertest.SQLite(t)
	base := e.Start(t)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	login(t, c, base, e.Tokens[auth.RoleViewer])
	page := get(t, c, base+"/probe")
	for _, want := range []string{`<h1 id="probe">探针页面</h1>`, `href="/probe" class="on"`, `<title>探针 · Keel</title>`, "t-viewer"} {
		if !strings.Contains(page, want) {
			t.Errorf("module page lacks %q:\n%s", want, page)
		}
	}
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if csrf == nil {
		t.Fatal("no CSRF token on the page")
	}
	if s := post(t, c, base+"/probe/poke", url.Values{}); s != http.StatusForbidden {
		t.Errorf("poke without CSRF: %d, want 403", s)
	}
	if s := post(t, c, base+"/probe/poke", url.Values{"csrf": {csrf[1]}, "back": {"/probe"}}); s != http.StatusSeeOther {
		t.Errorf("viewer poke: %d, want a redirect back with an error", s)
	}
	jar2, _ := cookiejar.New(nil)
	op := &http.Client{Jar: jar2, CheckRedirect: c.CheckRedirect}
	login(t, op, base, e.Tokens[auth.RoleOperator])
	page = get(t, op, base+"/probe?lang=en")
	if !strings.Contains(page, "Probe page") {
		t.Errorf("English page lacks its title:\n%s", page)
	}
	token := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)[1]
	req, _ := http.NewRequest("POST", base+"/probe/poke", strings.NewReader(url.Values{"csrf": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := op.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/probe?flash=poked" {
		t.Errorf("operator poke: %d → %s", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func login(t *testing.T, c *http.Client, base, token string) {
	t.Helper()
	resp, err := c.PostForm(base+"/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
}

func get(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return string(b)
}

func post(t *testing.T, c *http.Client, u string, v url.Values) int {
	t.Helper()
	resp, err := c.PostForm(u, v)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestProbes: /healthz answers while the process lives; /readyz answers
// while the database does and turns 503 once shutdown begins.
func TestProbes(t *testing.T) {
	e := servertest.Postgres(t)
	h := e.Server.Handler()
	probe := func(path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code
	}
	if probe("/healthz") != 200 || probe("/readyz") != 200 {
		t.Fatalf("healthz %d, readyz %d; want 200, 200", probe("/healthz"), probe("/readyz"))
	}
	if err := e.Server.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if probe("/readyz") != http.StatusServiceUnavailable || probe("/healthz") != 200 {
		t.Fatalf("after shutdown: readyz %d, healthz %d; want 503, 200", probe("/readyz"), probe("/healthz"))
	}
}
