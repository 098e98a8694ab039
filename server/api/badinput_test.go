package api_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/keelwork/keel/server/api"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

// TestBadInputWalk sends the catalogue of bad input (NULs, controls,
// invalid UTF-8, over-long text, negative and overflowing numbers, null
// and non-object bodies, bad ids, out-of-range paging) to every route as
// an admin: every answer is a 4xx problem, and no table changed.
func TestBadInputWalk(t *testing.T) {
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		ctx := context.Background()
		jobID, err := e.Insert(ctx, servertest.Args{N: 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		batchID, err := e.CreateBatch(ctx, "servertest", "bad input walk", 3)
		if err != nil {
			t.Fatal(err)
		}
		_, tok, err := e.Store.CreateToken(ctx, "walked", auth.RoleViewer, "test", "bad input walk")
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]string{"id": strconv.FormatInt(jobID, 10), "name": "default", "key": "k1"}
		n := servertest.WalkBadInput(t, e.Server.API(), e.Tokens[auth.RoleAdmin], e.Digest, func(method, pattern string) servertest.Good {
			g := servertest.Good{Params: ids, Body: map[string]any{"reason": "a good reason"}}
			switch {
			case strings.HasPrefix(pattern, api.Prefix+"/batches/"):
				g.Params = map[string]string{"id": strconv.FormatInt(batchID, 10), "key": "app:1"}
			case strings.HasPrefix(pattern, api.Prefix+"/tokens/"):
				g.Params = map[string]string{"id": strconv.FormatInt(tok.ID, 10)}
			case strings.HasSuffix(pattern, "/flow/limits") && method == "PUT":
				g.Body = map[string]any{"pattern": "k*", "rate": 5.0, "burst": 2.0, "max_running": 3.0, "reason": "a good reason"}
			case strings.HasSuffix(pattern, "/flow/limits") && method == "DELETE":
				g.Body = map[string]any{"pattern": "k*", "queue": "default", "reason": "a good reason"}
			case strings.HasSuffix(pattern, "/tokens") && method == "POST":
				g.Body = map[string]any{"name": "made", "role": "viewer", "reason": "a good reason"}
			case pattern == "/admin/probe/things":
				g.Body = map[string]any{"name": "p"}
			}
			return g
		})
		t.Logf("sent %d bad requests", n)
	})
}
