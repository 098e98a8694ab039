package api_test

import (
	"strings"
	"testing"

	"github.com/keelwork/keel/server/api"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

// TestActingOnUnknownIs404: pausing or resuming a queue that does not
// exist is a 404 and invents no queue; a queue with jobs can be paused.
func TestActingOnUnknownIs404(t *testing.T) {
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		h, tok := e.Server.API(), e.Tokens[auth.RoleOperator]
		for _, action := range []string{"pause", "resume"} {
			r := call(t, h, "POST", api.Prefix+"/queues/nosuchqueue/"+action, tok, "application/json", `{"reason":"maintenance"}`)
			if r.status != 404 || problemCode(t, r) != api.CodeNotFound {
				t.Errorf("%s unknown queue: %d %s", action, r.status, r.body)
			}
		}
		r := call(t, h, "GET", api.Prefix+"/queues", tok, "", "")
		if strings.Contains(string(r.body), "nosuchqueue") {
			t.Errorf("the unknown queue appears in the list: %s", r.body)
		}
		if r := call(t, h, "POST", api.Prefix+"/queues/default/pause", tok, "application/json", `{"reason":"maintenance"}`); r.status != 200 {
			t.Errorf("pause default: %d %s", r.status, r.body)
		}
	})
}
