package cli_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/internal/cli"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/server"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

// TestServeWithModules runs `keel serve` in process on PostgreSQL with every
// installed module: the server migrates their lines, every route (engine and
// modules) answers exactly the roles it declares and never a 5xx on
// placeholder input, every navigation page renders for a viewer, and the
// server shuts down cleanly.
func TestServeWithModules(t *testing.T) {
	t.Parallel()
	_, schema := testdb.OpenPostgres(t, &testdb.Options{Bare: true})
	flags := map[string]string{"database-url": testdb.ServeURL(t, schema), "schema": schema,
		"addr": "127.0.0.1:0", "cookie-secure": "false", "log-level": "error", "shutdown-timeout": "10s",
		"module-settings": testModuleSettings(t)}
	o, err := cli.ResolveServe("", func(string) string { return "" }, flags)
	if err != nil {
		t.Fatal(err)
	}
	type running struct {
		srv   *server.Server
		store *auth.Store
	}
	ready := make(chan running, 1)
	o.Ready = func(srv *server.Server, store *auth.Store) { ready <- running{srv, store} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cli.Serve(ctx, o, io.Discard) }()
	var r running
	select {
	case r = <-ready:
	case err := <-done:
		t.Fatalf("serve ended before it was ready: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("serve not ready within 60s")
	}
	tokens := map[auth.Role]string{}
	for _, role := range []auth.Role{auth.RoleViewer, auth.RoleOperator, auth.RoleAdmin} {
		secret, _, err := r.store.CreateToken(ctx, "t-"+role.String(), role, "test", "module walk")
		if err != nil {
			t.Fatal(err)
		}
		tokens[role] = secret
	}
	n := servertest.WalkAuthorization(t, r.srv.API(), tokens, placeholderRequest)
	t.Logf("walked %d routes", n)
	links := visitNav(t, r.srv.URL(), tokens[auth.RoleViewer])
	browseNav(t, r.srv.URL(), tokens[auth.RoleViewer], links)
	// The scraper sees the connection pool: the walk above acquired
	// connections, so the count is not zero.
	if v := scrape(t, r.srv.URL(), `pgxpool_acquire_count{db_name="keel"}`); v <= 0 {
		t.Errorf("pgxpool_acquire_count is %v after the walk", v)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve shut down with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not shut down within 30s")
	}
}

// testModuleSettings are the module settings of a test server: an
// ephemeral CMPP port, the export's files in the test's own directory
// (by default they go under ./.keel, which here is the source tree), and
// 2,000 demo orders rather than 20,000: the demo exports them to CSV and
// XLSX at start, which under the race detector was minutes of CPU beside
// the rest of the suite, and no test here needs more than a few rows.
func testModuleSettings(t testing.TB) string {
	return "delivery.cmpp_addr=127.0.0.1:0,alarm.embedded_addr=127.0.0.1:0,export.demo_rows=2000,export.dir=" + t.TempDir()
}

// placeholderRequest fills path parameters with values that name nothing,
// and sends an empty JSON object: enough to pass authorization and reach
// the handler, which must answer 4xx, not 5xx.
func placeholderRequest(method, pattern string) servertest.Request {
	path := pattern
	for strings.Contains(path, "{") {
		i := strings.Index(path, "{")
		j := strings.Index(path[i:], "}")
		path = path[:i] + "999999" + path[i+j+1:]
	}
	body := ""
	if method != http.MethodGet && method != http.MethodDelete {
		body = "{}"
	}
	return servertest.Request{Path: path, Body: body}
}

// browseNav opens every navigation entry in Chromium: each page, the
// engine's and every module's, renders without a console error.
func browseNav(t *testing.T, base, token string, links []string) {
	t.Helper()
	br := browsertest.New(t, 90*time.Second)
	br.Login(base, token)
	for _, l := range links {
		name := "nav" + strings.NewReplacer("/", "-").Replace(strings.TrimSuffix(l, "/"))
		if l == "/" {
			name = "nav-overview"
		}
		br.Do("open "+l, chromedp.Navigate(base+l), chromedp.WaitVisible(chromedp.CSS("main")), br.Shot(name))
	}
	br.CheckConsole()
}

// visitNav logs in as a viewer and opens every navigation entry; it
// returns their paths.
func visitNav(t *testing.T, base, token string) []string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm(base+"/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	home, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	links := navLinks(string(home))
	if len(links) < 7 {
		t.Fatalf("navigation has %d entries: %v", len(links), links)
	}
	for _, l := range links {
		resp, err := c.Get(base + l)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "</main>") {
			t.Errorf("GET %s: %d\n%.500s", l, resp.StatusCode, body)
		}
	}
	return links
}

// navLinks reads the href of every link inside the header's <nav>, each
// once, in the order of first appearance.
func navLinks(page string) []string {
	i := strings.Index(page, "<nav>")
	j := strings.Index(page, "</nav>")
	if i < 0 || j < i {
		return nil
	}
	// The overview and each module's home appear more than once (the
	// bar and its groups); a page is opened once.
	var out []string
	seen := map[string]bool{}
	for _, part := range strings.Split(page[i:j], `href="`)[1:] {
		l := part[:strings.Index(part, `"`)]
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

// scrape reads one sample of base's /metrics, as a scraper does (the
// endpoint is unauthenticated); a missing sample fails the test.
func scrape(t *testing.T, base, sample string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(l, sample+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("/metrics: %s: %v", l, err)
			}
			return v
		}
	}
	t.Fatalf("/metrics has no %s", sample)
	return 0
}
