package moduletest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/web"
)

// ActorHeader names the acting user of one request to APIHandler; without
// it the request acts as the handler's default actor. Keel's server takes
// the actor from the request's token: a test names it instead, so one
// server can take requests from several people (a per-user cap).
const ActorHeader = "X-Keel-Test-Actor"

// ServeAPI serves routes (a module's Routes) over HTTP as APIHandler does,
// acting as actor, until t ends. Its URL is what an HTTPCaller or Do is
// given.
func ServeAPI(t testing.TB, routes []module.Route, actor string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(APIHandler(routes, actor))
	t.Cleanup(s.Close)
	return s
}

// APIHandler serves routes the way Keel's server serves a module's admin
// API, so a test sees the answers a client of the real server would: each
// route at its absolute pattern, the actor (ActorHeader's, else actor) on
// the request's context, the handler's value as JSON with its status, and
// an error as a problem+json document with its stable code and the code's
// catalogued status (the engine's not-found, invalid-argument and
// invalid-state errors mapped as the server maps them). A handler that
// wrote its own answer (a download) gets nothing added. Authentication and
// roles are the server's own and are not checked here; unlike the server,
// an internal error keeps its detail, which is what the failing test
// prints.
func APIHandler(routes []module.Route, actor string) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range routes {
		handle := rt.Handle
		mux.HandleFunc(rt.Pattern, func(w http.ResponseWriter, r *http.Request) {
			who := r.Header.Get(ActorHeader)
			if who == "" {
				who = actor
			}
			ww := &writeWatch{ResponseWriter: w}
			status, body, err := handle(ww, r.WithContext(keel.WithActor(r.Context(), who)))
			if err != nil {
				writeProblem(w, err)
				return
			}
			if ww.wrote {
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			if body != nil {
				_ = json.NewEncoder(w).Encode(body)
			}
		})
	}
	return mux
}

// writeWatch notes whether a handler wrote its own answer.
type writeWatch struct {
	http.ResponseWriter
	wrote bool
}

func (w *writeWatch) WriteHeader(status int) { w.wrote = true; w.ResponseWriter.WriteHeader(status) }

func (w *writeWatch) Write(p []byte) (int, error) { w.wrote = true; return w.ResponseWriter.Write(p) }

// Flush sends what a download wrote so far, as the server's writer does.
func (w *writeWatch) Flush() {
	w.wrote = true
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *writeWatch) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// problem is the server's problem+json document.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
}

func writeProblem(w http.ResponseWriter, err error) {
	p := problem{Code: web.CodeInternal, Detail: err.Error()}
	if e, ok := web.As(err); ok {
		p.Code, p.Detail, p.Status = e.Code, e.Detail, e.Status
	} else {
		for _, m := range []struct {
			err  error
			code string
		}{
			{keeltype.ErrNotFound, web.CodeNotFound},
			{keeltype.ErrInvalidArgument, web.CodeInvalidArgument},
			{keeltype.ErrStaleFence, web.CodeStaleFence},
			{keeltype.ErrInvalidState, web.CodeInvalidState},
		} {
			if errors.Is(err, m.err) {
				p.Code = m.code
				break
			}
		}
	}
	// The server drops the engine's and drivers' package prefixes: a
	// person has no use for them.
	p.Detail = strings.NewReplacer("keelsqlite: ", "", "keelpgx: ", "", "keeldriver: ", "", "keel: ", "").Replace(p.Detail)
	// A catalogued code keeps the catalogue's status: one code never
	// means two.
	if c, ok := web.Lookup(p.Code); ok {
		p.Status, p.Title = c.Status, c.Title
	}
	if p.Status < 400 || p.Status > 599 {
		p.Status = http.StatusInternalServerError
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	p.Type = "urn:keel:problem:" + p.Code
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// Answer is one HTTP answer as a client reads it.
type Answer struct {
	Status int
	Header http.Header
	// Body is the answer's JSON object (a problem's "code", a created
	// record's "id"); empty when the answer is not one.
	Body map[string]any
}

// Do sends one request to base+path as a client of the API would: body,
// when not nil, as JSON (a string is sent as it is: malformed JSON on
// purpose), and header's fields (ActorHeader to act as another user). A
// request that gets no answer within a minute is reported with t.Errorf,
// not Fatal, since racing goroutines send too; its zero Answer passes no
// check.
func Do(t testing.TB, base, method, path string, body any, header http.Header) Answer {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Errorf("%s %s: encoding the body: %v", method, path, err)
			return Answer{}
		}
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return Answer{}
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return Answer{}
	}
	defer resp.Body.Close()
	a := Answer{Status: resp.StatusCode, Header: resp.Header, Body: map[string]any{}}
	_ = json.NewDecoder(resp.Body).Decode(&a.Body)
	return a
}
