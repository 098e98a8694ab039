package delivery

import (
	"math"
	"net/http"

	"github.com/keelwork/keel/module/web"
)

// Every request is checked here, field by field, before anything is
// written: a refused request changes nothing.

func init() {
	web.Register("delivery_not_found", http.StatusNotFound, "No such delivery record")
	web.Register("application_not_found", http.StatusNotFound, "No such application")
	web.Register("enterprise_not_found", http.StatusNotFound, "No such enterprise")
	web.Register("application_changed", http.StatusConflict, "Application changed meanwhile")
	web.Register("requeue_refused", http.StatusConflict, "Record not requeued")
}

// wholeRate checks a rate in pushes per second: a whole number 1..max
// (0 allowed when zeroOK: the default applies).
func wholeRate(field string, v float64, zeroOK bool) error {
	switch {
	case zeroOK && v == 0:
		return nil
	case math.IsNaN(v) || v != math.Trunc(v) || v < 1 || v > MaxTaskRate:
		return web.Invalid("%s must be a whole number of pushes per second, 1 to %d", field, MaxTaskRate)
	}
	return nil
}

func checkFilterText(f *Filter) error {
	var err error
	if f.Keyword, err = web.OptionalText("keyword", f.Keyword, maxKeyword); err != nil {
		return err
	}
	if _, err = web.OptionalText("date_from", f.DateFrom, 10); err != nil {
		return err
	}
	_, err = web.OptionalText("date_to", f.DateTo, 10)
	return err
}

func (b *appBody) check() error {
	var err error
	if b.EnterpriseID < 1 {
		return web.Invalid("enterprise_id must be a positive integer")
	}
	if b.Name, err = web.Name("name", b.Name, 200); err != nil {
		return err
	}
	if b.Account, err = web.Name("account", b.Account, 32); err != nil {
		return err
	}
	if _, err = web.Name("secret", b.Secret, 64); err != nil {
		return err
	}
	if b.PushURL, err = web.OptionalText("push_url", b.PushURL, 2000); err != nil {
		return err
	}
	if b.MOCode, err = web.OptionalText("mo_code", b.MOCode, 21); err != nil {
		return err
	}
	return wholeRate("rate", b.Rate, true)
}

func checkAppChange(c *AppChange) error {
	if c.PushURL != nil {
		u, err := web.OptionalText("push_url", *c.PushURL, 2000)
		if err != nil {
			return err
		}
		c.PushURL = &u
	}
	if c.Rate != nil {
		return wholeRate("rate", *c.Rate, false)
	}
	return nil
}

func checkTaskRequest(b *CreateTaskRequest) error {
	var err error
	if b.Token, err = web.Name("token", b.Token, 4096); err != nil {
		return web.Invalid("token is required: preview the filter first")
	}
	if b.Reason, err = web.Reason(b.Reason, true); err != nil {
		return err
	}
	if b.Name, err = web.OptionalText("name", b.Name, 200); err != nil {
		return err
	}
	if err := wholeRate("rate", b.Rate, true); err != nil {
		return err
	}
	if b.AutoPause < 0 || b.AutoPause > 1000 {
		return web.Invalid("auto_pause must be 1 to 1000 (0: the default %d)", DefaultTaskAutoPause)
	}
	return nil
}

// recordParams are the record list's query parameters: the filter, the
// page and its size.
var recordParams = []string{"enterprise_id", "app_id", "kind", "status", "date_from", "date_to", "keyword",
	"page", "size", "lang"}
