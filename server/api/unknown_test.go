package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/keelwork/keel"
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

// TestProblemsCarryNoDriverPrefix: a problem's detail is for a person:
// no driver or engine package prefix ("keelsqlite: getting job: …").
func TestProblemsCarryNoDriverPrefix(t *testing.T) {
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		h, tok := e.Server.API(), e.Tokens[auth.RoleOperator]
		for _, c := range []struct{ method, path string }{
			{"GET", api.Prefix + "/jobs/99999999"},
			{"POST", api.Prefix + "/jobs/99999999/cancel"},
			{"GET", api.Prefix + "/batches/99999999"},
			{"GET", api.Prefix + "/flow/keys/nosuchkey"},
		} {
			r := call(t, h, c.method, c.path, tok, "application/json", "")
			if r.status != 404 || problemCode(t, r) != api.CodeNotFound {
				t.Errorf("%s %s: %d %s", c.method, c.path, r.status, r.body)
			}
			var p api.Problem
			_ = json.Unmarshal(r.body, &p)
			for _, prefix := range []string{"keelsqlite", "keelpgx", "keel:"} {
				if p.Detail == "" || strings.Contains(p.Detail, prefix) {
					t.Errorf("%s %s: detail %q is empty or carries %q", c.method, c.path, p.Detail, prefix)
				}
			}
		}
	})
}

// TestUnauthenticatedSaysWhy: no token asks for one; a wrong token is said
// to be refused, not told to send a token it sent.
func TestUnauthenticatedSaysWhy(t *testing.T) {
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		for token, want := range map[string]string{"": "send Authorization: Bearer", "keel_wrong": "not accepted"} {
			r := call(t, e.Server.API(), "GET", api.Prefix+"/jobs", token, "", "")
			var p api.Problem
			_ = json.Unmarshal(r.body, &p)
			if r.status != 401 || !strings.Contains(p.Detail, want) {
				t.Errorf("token %q: %d %q, want %q", token, r.status, p.Detail, want)
			}
		}
	})
}

// TestKeyWithJobsIsShown: a key gets a state row only when a limit is
// applied to it or an operator acts on it, but a key with jobs and no such
// row is still a key: the job page links to it, so reading it answers its
// default state (not paused, breaker closed) with its job counts, and
// search finds it. A key with neither stays unknown.
func TestKeyWithJobsIsShown(t *testing.T) {
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		h, tok := e.Server.API(), e.Tokens[auth.RoleOperator]
		for n := range 3 {
			if _, err := e.Insert(t.Context(), servertest.Args{N: n}, &keel.InsertOpts{FlowKey: "app:42"}); err != nil {
				t.Fatal(err)
			}
		}
		r := call(t, h, "GET", api.Prefix+"/flow/keys/app:42", tok, "", "")
		var k api.FlowKey
		if err := json.Unmarshal(r.body, &k); r.status != 200 || err != nil {
			t.Fatalf("a key with jobs: %d %s", r.status, r.body)
		}
		if k.Key != "app:42" || k.Paused || k.Breaker != "closed" || k.Counts["available"] != 3 {
			t.Errorf("a key with jobs reads %+v", k)
		}
		r = call(t, h, "GET", api.Prefix+"/search?q=app:42", tok, "", "")
		if r.status != 200 || !strings.Contains(string(r.body), `"/keys/app:42"`) {
			t.Errorf("search for the key: %d %s", r.status, r.body)
		}
		if r := call(t, h, "GET", api.Prefix+"/flow/keys/app:43", tok, "", ""); r.status != 404 {
			t.Errorf("a key without jobs or state: %d %s", r.status, r.body)
		}
	})
}
