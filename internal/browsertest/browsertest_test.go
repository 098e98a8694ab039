package browsertest_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/server/auth"
)

// TestServeEnv: a module test's environment on either database holds the
// server's lines, so Keel's server runs on it and a token made for the
// test is the one its API accepts.
func TestServeEnv(t *testing.T) {
	t.Parallel()
	browsertest.Both(t, nil, testServeEnv[pgx.Tx], testServeEnv[*sql.Tx])
}

func testServeEnv[TTx any](t *testing.T, e *moduletest.Env[TTx]) {
	ctx := context.Background()
	srv := browsertest.ServeEnv(t, e, e.Run(t, nil))
	req, err := http.NewRequestWithContext(ctx, "GET", srv.Base+"/api/v1/me", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+srv.Token("ops-li", auth.RoleOperator))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var me struct{ Name, Role string }
	if err := json.NewDecoder(resp.Body).Decode(&me); err != nil || resp.StatusCode != http.StatusOK || me.Name != "ops-li" {
		t.Fatalf("%s: /me answered %d %+v (%v)", e.Name, resp.StatusCode, me, err)
	}
}

// TestSession: a session is its person logged in to the console.
func TestSession(t *testing.T) {
	t.Parallel()
	e := browsertest.PostgresEnv(t, nil)
	srv := browsertest.ServeEnv(t, e, e.Run(t, nil))
	br := srv.Session("ops-li", auth.RoleOperator, 90*time.Second)
	br.Do("the console", chromedp.WaitVisible(chromedp.CSS("header nav")))
	br.MustSee("who is logged in", "header .user", "ops-li")
	br.CheckConsole()
}
