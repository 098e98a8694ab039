package eventsweb_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/keelwork/keel/server/servertest"
)

// TestRoutesAuthorization walks every route of the surface (events,
// reconciliation, approvals) as no one, a bogus token and each role:
// exactly the declared roles get past authorization, and placeholder input
// never gets a 5xx.
func TestRoutesAuthorization(t *testing.T) {
	each(t, func(t *testing.T, s *served) {
		n := servertest.WalkAuthorization(t, s.api, s.roles, func(method, pattern string) servertest.Request {
			path := pattern
			for strings.Contains(path, "{") {
				i := strings.Index(path, "{")
				j := strings.Index(path[i:], "}")
				path = path[:i] + "999999" + path[i+j+1:]
			}
			body := ""
			if method != http.MethodGet {
				body = "{}"
			}
			return servertest.Request{Path: path, Body: body}
		})
		if n < 17 {
			t.Fatalf("walked %d routes", n)
		}
	})
}
