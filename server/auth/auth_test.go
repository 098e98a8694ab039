package auth_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

func TestTokensAndSessions(t *testing.T) {
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		ctx := context.Background()
		st := e.Store
		secret, tok, err := st.CreateToken(ctx, "ci", auth.RoleOperator, "test", "ci token")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(secret, auth.TokenPrefix) || len(secret) < 40 {
			t.Fatalf("weak secret %q", secret)
		}
		p, err := st.Authenticate(ctx, secret)
		if err != nil || p.Name != "ci" || p.Role != auth.RoleOperator || p.Actor() != "token:ci" {
			t.Fatalf("authenticate: %+v %v", p, err)
		}
		if _, err := st.Authenticate(ctx, secret+"x"); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatalf("wrong secret: %v", err)
		}
		cookie, err := st.CreateSession(ctx, p, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		sp, err := st.Session(ctx, cookie)
		if err != nil || sp.TokenID != tok.ID || sp.CSRF == "" {
			t.Fatalf("session: %+v %v", sp, err)
		}
		if !auth.CSRFMatches(sp, sp.CSRF) || auth.CSRFMatches(sp, "nope") {
			t.Fatal("CSRF comparison wrong")
		}
		if _, err := st.RevokeToken(ctx, tok.ID, "rotated"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RevokeToken(ctx, tok.ID, "rotated"); !errors.Is(err, keeltype.ErrInvalidState) {
			t.Fatalf("second revoke: %v", err)
		}
		if _, err := st.Authenticate(ctx, secret); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatalf("revoked token still works: %v", err)
		}
		if _, err := st.Session(ctx, cookie); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatalf("revoked token's session still works: %v", err)
		}
		list, err := st.ListTokens(ctx, 0, 100)
		if err != nil || len(list) != 4 {
			t.Fatalf("list: %d %v", len(list), err)
		}
		target := "token:" + strconv.FormatInt(tok.ID, 10)
		rows, err := e.Engine.AuditList(ctx, &keel.AuditListParams{Target: target, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, r.Action+"/"+r.Reason)
		}
		if strings.Join(got, ",") != "token.revoke/rotated,token.create/ci token" {
			t.Fatalf("audit of %s: %v", target, got)
		}
	})
}

// TestTokenChangeAndAuditAreAtomic: a token change whose audit entry cannot
// be written does not happen.
func TestTokenChangeAndAuditAreAtomic(t *testing.T) {
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		ctx := context.Background()
		tooLong := strings.Repeat("r", 100_000)
		if _, _, err := e.Store.CreateToken(ctx, "never", auth.RoleViewer, "test", tooLong); err == nil {
			t.Fatal("create with an unauditable reason succeeded")
		}
		list, err := e.Store.ListTokens(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range list {
			if tk.Name == "never" {
				t.Fatal("token created although its audit entry failed")
			}
		}
		_, tok, err := e.Store.CreateToken(ctx, "kept", auth.RoleViewer, "test", "fixture")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Store.RevokeToken(ctx, tok.ID, tooLong); err == nil {
			t.Fatal("revoke with an unauditable reason succeeded")
		}
		if got, err := e.Store.GetToken(ctx, tok.ID); err != nil || got.RevokedAt != nil {
			t.Fatalf("token revoked although its audit entry failed: %+v %v", got, err)
		}
	})
}

// TestSharedSecret: the first caller creates the secret, every later one
// (another instance) reads the same value.
func TestSharedSecret(t *testing.T) {
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		ctx := context.Background()
		a, err := e.Store.SharedSecret(ctx, "k")
		if err != nil || len(a) < 32 {
			t.Fatalf("first: %q %v", a, err)
		}
		b, err := e.Store.SharedSecret(ctx, "k")
		if err != nil || string(a) != string(b) {
			t.Fatalf("second read %q, want %q (%v)", b, a, err)
		}
		if c, _ := e.Store.SharedSecret(ctx, "other"); string(c) == string(a) {
			t.Fatal("two names share one secret")
		}
	})
}
