package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/server/api"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

type response struct {
	status int
	ctype  string
	body   []byte
}

func call(t *testing.T, h http.Handler, method, path, token, ctype, body string) response {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Result().Body)
	return response{status: rec.Code, ctype: rec.Header().Get("Content-Type"), body: b}
}

func problemCode(t *testing.T, r response) api.Code {
	t.Helper()
	if r.ctype != "application/problem+json" {
		t.Fatalf("content type %q, want application/problem+json (status %d, body %s)", r.ctype, r.status, r.body)
	}
	var p api.Problem
	if err := json.Unmarshal(r.body, &p); err != nil || p.Code == "" || p.Status != r.status {
		t.Fatalf("bad problem document %s: %v", r.body, err)
	}
	return p.Code
}

// TestAuthorization walks the router: every route × every identity; only
// roles at or above the route's declared role get past authorization.
func TestAuthorization(t *testing.T) {
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		ctx := context.Background()
		n := servertest.WalkAuthorization(t, e.Server.API(), e.Tokens, func(method, pattern string) servertest.Request {
			jobID, err := e.Insert(ctx, servertest.Args{N: 1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			path := strings.NewReplacer("{id}", strconv.FormatInt(jobID, 10), "{name}", "default", "{key}", "k1").Replace(pattern)
			if strings.HasPrefix(pattern, api.Prefix+"/tokens/") {
				_, tok, err := e.Store.CreateToken(ctx, "victim", auth.RoleViewer, "test", "victim token")
				if err != nil {
					t.Fatal(err)
				}
				path = api.Prefix + "/tokens/" + strconv.FormatInt(tok.ID, 10)
			}
			body := ""
			switch {
			case strings.HasSuffix(pattern, "/flow/limits") && method != "GET":
				body = `{"pattern":"k*","rate":5}`
			case strings.HasSuffix(pattern, "/tokens") && method == "POST":
				body = `{"name":"made","role":"viewer"}`
			case pattern == "/admin/probe/things":
				body = `{"name":"p"}`
			}
			return servertest.Request{Path: path, Body: body}
		})
		if n < 20 {
			t.Fatalf("walked only %d routes", n)
		}
	})
}

// TestBadInput: malformed, unknown, mistyped, huge and SQL-ish input gets a
// 4xx problem with its code, and changes nothing.
func TestBadInput(t *testing.T) {
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		ctx := context.Background()
		h := e.Server.API()
		id, err := e.Insert(ctx, servertest.Args{N: 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		job := api.Prefix + "/jobs/" + strconv.FormatInt(id, 10)
		huge := `{"reason":"` + strings.Repeat("x", api.MaxBodyBytes+10) + `"}`
		cases := []struct {
			name, method, path, ctype, body string
			status                          int
			code                            api.Code
		}{
			{"malformed json", "POST", job + "/cancel", "application/json", `{"reason":`, 400, api.CodeInvalidJSON},
			{"not an object", "POST", job + "/cancel", "application/json", `[1,2]`, 400, api.CodeInvalidArgument},
			{"trailing data", "POST", job + "/cancel", "application/json", `{"reason":"a"} {}`, 400, api.CodeInvalidJSON},
			{"unknown field", "POST", job + "/cancel", "application/json", `{"reason":"a","force":true}`, 400, api.CodeUnknownField},
			{"wrong type", "POST", job + "/cancel", "application/json", `{"reason":42}`, 400, api.CodeInvalidArgument},
			{"long reason", "POST", job + "/cancel", "application/json", `{"reason":"` + strings.Repeat("r", 1001) + `"}`, 400, api.CodeInvalidArgument},
			{"huge body", "POST", job + "/cancel", "application/json", huge, 413, api.CodeBodyTooLarge},
			{"wrong media type", "POST", job + "/cancel", "text/plain", `{"reason":"a"}`, 415, api.CodeUnsupportedMedia},
			{"bad id", "POST", api.Prefix + "/jobs/abc/cancel", "", "", 400, api.CodeInvalidArgument},
			{"negative id", "GET", api.Prefix + "/jobs/-4", "", "", 400, api.CodeInvalidArgument},
			{"missing job", "POST", api.Prefix + "/jobs/999999/cancel", "", "", 404, api.CodeNotFound},
			{"limit too big", "GET", api.Prefix + "/jobs?limit=1001", "", "", 400, api.CodeInvalidArgument},
			{"limit zero", "GET", api.Prefix + "/jobs?limit=0", "", "", 400, api.CodeInvalidArgument},
			{"limit not a number", "GET", api.Prefix + "/jobs?limit=ten", "", "", 400, api.CodeInvalidArgument},
			{"bad cursor", "GET", api.Prefix + "/jobs?cursor=!!!", "", "", 400, api.CodeInvalidCursor},
			{"malformed query", "GET", api.Prefix + "/jobs?cursor=%%%", "", "", 400, api.CodeInvalidArgument},
			{"foreign cursor", "GET", api.Prefix + "/jobs?cursor=azox", "", "", 400, api.CodeInvalidCursor},
			{"audit cursor on keys", "GET", api.Prefix + "/audit?cursor=ZmxvdzoxMg", "", "", 400, api.CodeInvalidCursor},
			{"unknown state", "GET", api.Prefix + "/jobs?state=done", "", "", 400, api.CodeInvalidArgument},
			{"sql in state", "GET", api.Prefix + "/jobs?state=" + urlq("available' OR '1'='1"), "", "", 400, api.CodeInvalidArgument},
			{"sql in kind", "GET", api.Prefix + "/jobs?kind=" + urlq("x; DROP TABLE keel_job; --"), "", "", 400, api.CodeInvalidArgument},
			{"sql in queue", "GET", api.Prefix + "/jobs?queue=" + urlq("default\" OR 1=1"), "", "", 400, api.CodeInvalidArgument},
			{"sql in queue path", "POST", api.Prefix + "/queues/" + urlq("a' OR 1=1 --") + "/pause", "", "", 400, api.CodeInvalidArgument},
			{"unknown param", "GET", api.Prefix + "/jobs?stat=manual", "", "", 400, api.CodeInvalidArgument},
			{"control char filter", "GET", api.Prefix + "/audit?actor=" + urlq("a\x00b"), "", "", 400, api.CodeInvalidArgument},
			{"bad time", "GET", api.Prefix + "/audit?since=yesterday", "", "", 400, api.CodeInvalidArgument},
			{"bad bool", "GET", api.Prefix + "/flow/keys?paused=maybe", "", "", 400, api.CodeInvalidArgument},
			{"limit out of range", "PUT", api.Prefix + "/flow/limits", "application/json", `{"pattern":"a:*","rate":-1}`, 400, api.CodeInvalidArgument},
			{"limit bad duration", "PUT", api.Prefix + "/flow/limits", "application/json", `{"pattern":"a:*","breaker_failures":3,"breaker_cooldown":"soon"}`, 400, api.CodeInvalidArgument},
			{"limit bad pattern", "PUT", api.Prefix + "/flow/limits", "application/json", `{"pattern":"a*b*"}`, 400, api.CodeInvalidArgument},
			{"limit missing body", "PUT", api.Prefix + "/flow/limits", "application/json", ``, 400, api.CodeInvalidJSON},
			{"limit server fields", "PUT", api.Prefix + "/flow/limits", "application/json", `{"pattern":"a:*","updated_by":"me"}`, 400, api.CodeInvalidArgument},
			{"token bad role", "POST", api.Prefix + "/tokens", "application/json", `{"name":"x","role":"root"}`, 400, api.CodeInvalidArgument},
			{"token bad name", "POST", api.Prefix + "/tokens", "application/json", `{"name":"x y'; --","role":"viewer"}`, 400, api.CodeInvalidArgument},
			{"wrong method", "PATCH", api.Prefix + "/jobs", "", "", 405, api.CodeMethodNotAllowed},
			{"no route", "GET", api.Prefix + "/nope", "", "", 404, api.CodeNotFound},
		}
		before := snapshot(t, e)
		for _, c := range cases {
			r := call(t, h, c.method, c.path, e.Tokens[auth.RoleAdmin], c.ctype, c.body)
			if r.status != c.status {
				t.Errorf("%s: status %d, want %d (%s)", c.name, r.status, c.status, r.body)
				continue
			}
			if code := problemCode(t, r); code != c.code {
				t.Errorf("%s: code %s, want %s", c.name, code, c.code)
			}
		}
		if after := snapshot(t, e); after != before {
			t.Errorf("bad input changed something:\nbefore %s\nafter  %s", before, after)
		}
	})
}

func urlq(s string) string {
	return strings.NewReplacer("%", "%25", " ", "%20", "'", "%27", "\"", "%22", ";", "%3B", "=", "%3D", "\x00", "%00", "#", "%23").Replace(s)
}

// snapshot summarizes everything bad input could change.
func snapshot(t *testing.T, e *servertest.Env) string {
	t.Helper()
	ctx := context.Background()
	audit, err := e.Engine.AuditList(ctx, &keel.AuditListParams{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := e.Engine.JobList(ctx, &keel.JobListParams{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	limits, err := e.Engine.FlowLimits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	queues, err := e.Engine.QueueList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := e.Store.ListTokens(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("audit=" + strconv.Itoa(len(audit)) + " limits=" + strconv.Itoa(len(limits)) +
		" queues=" + strconv.Itoa(len(queues)) + " tokens=" + strconv.Itoa(len(tokens)) + " jobs=")
	for _, j := range jobs {
		b.WriteString(strconv.FormatInt(j.ID, 10) + ":" + string(j.State) + ",")
	}
	return b.String()
}

// TestPagingCoversEverything pages the job list to the end: no cap.
func TestPagingCoversEverything(t *testing.T) {
	e := servertest.SQLite(t)
	ctx := context.Background()
	for i := range 23 {
		if _, err := e.Insert(ctx, servertest.Args{N: i}, nil); err != nil {
			t.Fatal(err)
		}
	}
	seen, cursor := map[int64]bool{}, ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		r := call(t, e.Server.API(), "GET", api.Prefix+"/jobs?limit=5&cursor="+cursor, e.Tokens[auth.RoleViewer], "", "")
		var page api.Page[*api.Job]
		if r.status != 200 || json.Unmarshal(r.body, &page) != nil {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		for _, j := range page.Data {
			if seen[j.ID] {
				t.Fatalf("job %d twice", j.ID)
			}
			seen[j.ID] = true
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != 23 {
		t.Fatalf("paged %d jobs, want 23", len(seen))
	}
}
