package console_test

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

// TestLoginCookieAndCSRF: the session cookie is HttpOnly and
// SameSite=Strict; a state-changing form without the CSRF token is refused
// and changes nothing.
func TestLoginCookieAndCSRF(t *testing.T) {
	t.Parallel()
	e := servertest.SQLite(t)
	base := e.Start(t)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(base+"/login", url.Values{"token": {e.Tokens[auth.RoleOperator]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "keel_session" {
			session = ck
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %+v", session)
	}
	resp, err = c.PostForm(base+"/queues/default/pause", url.Values{"reason": {"no csrf"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("pause without CSRF: %d", resp.StatusCode)
	}
	qs, err := e.Engine.QueueList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.PausedAt != nil {
			t.Fatal("queue paused without CSRF token")
		}
	}
	resp, err = c.PostForm(base+"/login", url.Values{"token": {"keel_wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("bad login: %d", resp.StatusCode)
	}
	resp, err = http.Get(base + "/jobs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !strings.HasSuffix(resp.Request.URL.Path, "/login") {
		t.Fatalf("anonymous /jobs ended at %s", resp.Request.URL)
	}
}
