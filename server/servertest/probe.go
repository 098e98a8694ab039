package servertest

import (
	"html/template"
	"net/http"
	"strings"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/web"
)

// Probe is a minimal module mounted in every Env, so that the server's
// tests cover module routes (an absolute path outside /api/v1 and one
// inside), module problems, module pages, their navigation and CSRF.
type Probe struct{}

// Name names the probe module.
func (Probe) Name() string { return "probe" }

// Routes: a read inside the API prefix and a strict-body write outside it.
func (Probe) Routes() []module.Route {
	return []module.Route{
		{Pattern: "GET /api/v1/probe/things/{id}", Role: module.RoleViewer, Handle: probeGet},
		{Pattern: "POST /admin/probe/things", Role: module.RoleOperator, Handle: probeCreate},
	}
}

// Pages: a page and a form action.
func (Probe) Pages() []module.Page {
	return []module.Page{
		{Pattern: "GET /probe", Role: module.RoleViewer, Handle: probePage},
		{Pattern: "POST /probe/poke", Role: module.RoleOperator, Handle: probePoke},
	}
}

// Nav adds one entry.
func (Probe) Nav() []module.NavItem {
	return []module.NavItem{{Path: "/probe", ZH: "探针", EN: "Probe"}}
}

// Ingress: one public path, as a payment channel's notifications need
// (module.Ingress); it answers whoever calls, with no token.
func (Probe) Ingress() []module.Endpoint {
	return []module.Endpoint{{Pattern: "POST /probe/notify", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("received"))
	})}}
}

func probeGet(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	if q := web.NewQuery(r); q.Err != nil {
		return 0, nil, q.Err
	}
	id, err := web.PathID(r, "id")
	if err != nil {
		return 0, nil, err
	}
	if id > 100 {
		return 0, nil, module.Errorf(http.StatusNotFound, "probe_thing_not_found", "no thing %d", id)
	}
	return http.StatusOK, map[string]any{"id": id, "actor": keel.ActorFrom(r.Context())}, nil
}

func probeCreate(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var body struct {
		Name string `json:"name"`
	}
	if err := module.Decode(w, r, &body); err != nil {
		return 0, nil, err
	}
	name, err := web.Name("name", body.Name, 100)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, map[string]string{"name": name}, nil
}

var probeTmpl = template.Must(template.New("probe").Parse(
	`<h1 id="probe">{{.Title}}</h1><p id="probe-actor">{{.Actor}}</p>`))

func probePage(_ http.ResponseWriter, _ *http.Request, v *module.View) (*module.Rendered, error) {
	var b strings.Builder
	err := probeTmpl.Execute(&b, map[string]string{"Title": v.Zh("探针页面", "Probe page"), "Actor": v.Actor})
	return &module.Rendered{Title: v.Zh("探针", "Probe"), Nav: "/probe", Body: template.HTML(b.String())}, err
}

func probePoke(w http.ResponseWriter, r *http.Request, _ *module.View) (*module.Rendered, error) {
	http.Redirect(w, r, "/probe?flash=poked", http.StatusSeeOther)
	return nil, nil
}
