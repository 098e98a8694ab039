package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/server"
	"github.com/keelwork/keel/server/servertest"
)

// TestModuleIngress: a module's public endpoint (module.Ingress) answers
// without a token, only for its method; its neighbours stay behind the
// console and the API; an ingress under the API, on a taken path or
// without a method is refused when the server is built.
func TestModuleIngress(t *testing.T) {
	e := servertest.SQLite(t)
	base := e.Start(t)
	post := func(method, path string) (int, string) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader("x"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := post("POST", "/probe/notify"); status != 200 || body != "received" {
		t.Fatalf("public endpoint: %d %q", status, body)
	}
	if status, _ := post("GET", "/probe/notify"); status == 200 {
		t.Fatal("the public endpoint answered another method")
	}
	if status, _ := post("GET", "/api/v1/probe/things/7"); status != 401 {
		t.Fatalf("a module route without a token: %d", status)
	}
	for _, bad := range []string{"POST /api/v1/sneaky", "/nomethod", "POST /api/v1/probe/things/{id}", "POST /metrics", "GET /healthz"} {
		_, err := server.New(&server.Config{Addr: "127.0.0.1:0", Engine: e.Engine, Auth: e.Store,
			Modules: []module.Web{servertest.Probe{}, badIngress{bad}}})
		if err == nil {
			t.Errorf("ingress %q was accepted", bad)
		}
	}
}

type badIngress struct{ pattern string }

func (badIngress) Name() string           { return "bad" }
func (badIngress) Routes() []module.Route { return nil }
func (badIngress) Pages() []module.Page   { return nil }
func (badIngress) Nav() []module.NavItem  { return nil }
func (b badIngress) Ingress() []module.Endpoint {
	return []module.Endpoint{{Pattern: b.pattern, Handler: http.NotFoundHandler()}}
}
