package web

import (
	"html/template"
	"strings"
)

// The layouts of the console's date fields: what an operator types and
// what the form sends, in every language.
const (
	DateLayout     = "2006-01-02"
	DateTimeLayout = "2006-01-02 15:04"
)

// dateInput is the console's own date field. Chromium draws <input
// type=date> in its own UI language whatever the page's lang, so a
// Chinese page in an English browser would ask for mm/dd/yyyy: the field
// is a text input whose placeholder and format hint are the page's
// language, and the console's script (app.js) gives every input with
// data-date a calendar in that language.
var dateInput = template.Must(template.New("date").Parse(
	`<input type="text" name="{{.Name}}" value="{{.Value}}" data-date="{{.Kind}}" inputmode="numeric" autocomplete="off"` +
		` maxlength="{{.Max}}" placeholder="{{.Hint}}" title="{{.Title}}">`))

type dateField struct {
	Name, Value, Kind, Hint, Title string
	Max                            int
}

// DateInput is a date field named name holding value (YYYY-MM-DD or
// empty) for a page in lang, to be put in a <label> that names it. The
// form sends what DateLayout parses.
func DateInput(lang, name, value string) template.HTML {
	f := dateField{Name: name, Value: value, Kind: "date", Max: len(DateLayout),
		Hint: pick(lang, [2]string{"年-月-日", "yyyy-mm-dd"}, true, "")}
	f.Title = pick(lang, [2]string{"格式：年-月-日，例如 2026-07-14", "Format: yyyy-mm-dd, e.g. 2026-07-14"}, true, "")
	return render(f)
}

// DateTimeInput is a date-and-time field (YYYY-MM-DD HH:MM, DateTime
// Layout) in the same way.
func DateTimeInput(lang, name, value string) template.HTML {
	f := dateField{Name: name, Value: value, Kind: "datetime", Max: len(DateTimeLayout),
		Hint: pick(lang, [2]string{"年-月-日 时:分", "yyyy-mm-dd hh:mm"}, true, "")}
	f.Title = pick(lang, [2]string{"格式：年-月-日 时:分，例如 2026-07-14 09:30", "Format: yyyy-mm-dd hh:mm, e.g. 2026-07-14 09:30"}, true, "")
	return render(f)
}

func render(f dateField) template.HTML {
	var b strings.Builder
	if err := dateInput.Execute(&b, f); err != nil {
		// The template is a constant and its data strings: it cannot fail.
		panic(err)
	}
	return template.HTML(b.String())
}
