package console

import (
	"net/http"
	"strings"

	"github.com/keelwork/keel/module"
)

// Site is a module's console pages; those with words are its navigation,
// in the same order. A module lists each page once, its navigation words
// beside it, and gives the server both lists from it (module.Web's Pages
// and Nav): a navigation entry then cannot name a path that no page
// serves, nor fall out of step with its page when the path changes.
type Site []Entry

// Entry is one page of a Site: the module.Page's pattern, role and
// handler, and, on a GET page the navigation leads to, the words that
// name it there. A page without words is reached by links and forms.
type Entry struct {
	Pattern string
	Role    module.Role
	Handle  func(w http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error)
	ZH, EN  string
}

// Pages lists the site's pages for module.Web.
func (s Site) Pages() []module.Page {
	out := make([]module.Page, len(s))
	for i, e := range s {
		out[i] = module.Page{Pattern: e.Pattern, Role: e.Role, Handle: e.Handle}
	}
	return out
}

// Nav lists the entries with words for module.Web, at the path of their
// page's pattern.
func (s Site) Nav() []module.NavItem {
	var out []module.NavItem
	for _, e := range s {
		if e.ZH == "" && e.EN == "" {
			continue
		}
		path := e.Pattern
		if _, p, ok := strings.Cut(path, " "); ok {
			path = p
		}
		out = append(out, module.NavItem{Path: path, ZH: e.ZH, EN: e.EN})
	}
	return out
}
