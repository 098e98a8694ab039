package module

import (
	"html/template"
	"strings"
)

// Render executes the template name of t with data and wraps it as a page
// titled title, marking nav in the navigation: the one render helper of
// module pages.
func Render(t *template.Template, name, title, nav string, data any) (*Rendered, error) {
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, name, data); err != nil {
		return nil, err
	}
	return &Rendered{Title: title, Nav: nav, Body: template.HTML(b.String())}, nil
}
