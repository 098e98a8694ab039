package auth_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

func TestTokensAndSessions(t *testing.T) {
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		ctx := context.Background()
		st := e.Store
		secret, tok, err := st.CreateToken(ctx, "ci", auth.RoleOperator, "test")
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
		if _, err := st.RevokeToken(ctx, tok.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RevokeToken(ctx, tok.ID); !errors.Is(err, keeltype.ErrInvalidState) {
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
	})
}
