package console

import (
	"fmt"
	"net/http"

	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/server/auth"
)

// addModules mounts the modules' pages behind the same login, roles, CSRF
// check and audit actor as the console's own, and collects their
// navigation entries.
func (c *Console) addModules(mods []module.Web) error {
	for _, m := range mods {
		group := m.Name()
		if group == eventsWeb {
			group = engineGroup
		}
		for _, mp := range m.Pages() {
			role, err := pageRole(mp.Role)
			if err != nil {
				return fmt.Errorf("console: module %s: page %q: %w", m.Name(), mp.Pattern, err)
			}
			if _, dup := c.roles[mp.Pattern]; dup {
				return fmt.Errorf("console: module %s: page %q is already taken", m.Name(), mp.Pattern)
			}
			handle := mp.Handle
			c.mux.Handle(mp.Pattern, c.wrap(page{mp.Pattern, role, func(c *Console, w http.ResponseWriter, r *http.Request, v *view) error {
				return c.modulePage(w, r, v, handle)
			}, group}))
			c.roles[mp.Pattern] = role
		}
	}
	return nil
}

func pageRole(r module.Role) (auth.Role, error) {
	switch r {
	case module.RoleViewer:
		return auth.RoleViewer, nil
	case module.RoleOperator:
		return auth.RoleOperator, nil
	case module.RoleAdmin:
		return auth.RoleAdmin, nil
	}
	return auth.RoleNone, fmt.Errorf("no role declared (module pages are never public)")
}

// modulePage runs a module's handler with what the console knows of the
// request, and renders what it returns inside the layout.
func (c *Console) modulePage(w http.ResponseWriter, r *http.Request, v *view,
	handle func(http.ResponseWriter, *http.Request, *module.View) (*module.Rendered, error)) error {
	mv := &module.View{Lang: v.Lang, CSRF: v.CSRF, Flash: v.Flash, Error: v.Error}
	if v.Principal != nil {
		mv.Actor = v.Principal.Actor()
		mv.Role = moduleRole(v.Principal.Role)
	}
	// ?lang= is the console's (the layout's language switch adds it to any
	// page): the module has it as View.Lang, and a module that refuses
	// query parameters it does not know must not refuse the switch.
	if q := r.URL.Query(); q.Has("lang") {
		q.Del("lang")
		r2 := r.Clone(r.Context())
		r2.URL.RawQuery = q.Encode()
		r = r2
	}
	out, err := handle(w, r, mv)
	if err != nil || out == nil {
		return err
	}
	v.NavOn = out.Nav
	return c.render(w, v, "module", out)
}

func moduleRole(r auth.Role) module.Role {
	switch r {
	case auth.RoleAdmin:
		return module.RoleAdmin
	case auth.RoleOperator:
		return module.RoleOperator
	case auth.RoleViewer:
		return module.RoleViewer
	}
	return 0
}
