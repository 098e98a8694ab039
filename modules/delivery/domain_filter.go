package delivery

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Beijing is the business time zone: creation-date filters are natural
// days in China Standard Time (UTC+8, no daylight saving).
var Beijing = time.FixedZone("CST", 8*3600)

// dateLayout is the form of a filter date.
const dateLayout = "2006-01-02"

// maxKeyword bounds the keyword's length in characters.
const maxKeyword = 100

// Filter selects delivery records: the list's filter bar and the scope of
// a requeue task. Paging and selection are not part of it, so the same
// filter gives the same task whatever page the operator is on.
type Filter struct {
	EnterpriseID int64  `json:"enterprise_id,omitempty"`
	AppID        int64  `json:"app_id,omitempty"`
	Kind         Kind   `json:"kind,omitempty"`
	Status       Status `json:"status,omitempty"`
	// DateFrom and DateTo are Beijing natural days (YYYY-MM-DD), both
	// inclusive.
	DateFrom string `json:"date_from,omitempty"`
	DateTo   string `json:"date_to,omitempty"`
	// Keyword matches (substring, case-insensitive) the message id, the
	// customer account, the phone number, the last error, the enterprise
	// name or the application name.
	Keyword string `json:"keyword,omitempty"`
}

// Validate checks each field and names the wrong one.
func (f *Filter) Validate() error {
	f.Keyword = strings.TrimSpace(f.Keyword)
	switch {
	case f.EnterpriseID < 0:
		return fmt.Errorf("enterprise_id must be positive")
	case f.AppID < 0:
		return fmt.Errorf("app_id must be positive")
	case f.Kind != "" && !f.Kind.Valid():
		return fmt.Errorf("kind %q is not report or mo", f.Kind)
	case f.Status != "" && !f.Status.Valid():
		return fmt.Errorf("status %q is unknown", f.Status)
	case utf8.RuneCountInString(f.Keyword) > maxKeyword:
		return fmt.Errorf("keyword is longer than %d characters", maxKeyword)
	}
	from, to, err := f.bounds()
	if err != nil {
		return err
	}
	if from != nil && to != nil && !from.Before(*to) {
		return fmt.Errorf("date_from %s is after date_to %s", f.DateFrom, f.DateTo)
	}
	return nil
}

// bounds converts the date range to instants: [from 00:00, to+1 00:00)
// Beijing time.
func (f *Filter) bounds() (from, to *time.Time, err error) {
	if f.DateFrom != "" {
		d, err := time.ParseInLocation(dateLayout, f.DateFrom, Beijing)
		if err != nil {
			return nil, nil, fmt.Errorf("date_from %q is not YYYY-MM-DD", f.DateFrom)
		}
		u := d.UTC()
		from = &u
	}
	if f.DateTo != "" {
		d, err := time.ParseInLocation(dateLayout, f.DateTo, Beijing)
		if err != nil {
			return nil, nil, fmt.Errorf("date_to %q is not YYYY-MM-DD", f.DateTo)
		}
		u := d.AddDate(0, 0, 1).UTC()
		to = &u
	}
	return from, to, nil
}

// likePattern escapes the keyword for LIKE (backslash escapes) and wraps
// it in wildcards.
func likePattern(kw string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(kw) + "%"
}

// args are the eight filter parameters of the record queries; snapshot
// nil means no upper bound. The filter must be valid.
func (f *Filter) args(snapshot *time.Time) []any {
	from, to, _ := f.bounds()
	a := make([]any, 8)
	if f.EnterpriseID > 0 {
		a[0] = f.EnterpriseID
	}
	if f.AppID > 0 {
		a[1] = f.AppID
	}
	if f.Kind != "" {
		a[2] = string(f.Kind)
	}
	if f.Status != "" {
		a[3] = string(f.Status)
	}
	a[4], a[5], a[6] = from, to, snapshot
	if f.Keyword != "" {
		a[7] = likePattern(f.Keyword)
	}
	return a
}

// FilterFromQuery reads a filter from URL values (the console's filter
// bar, the list API). Unknown keys such as page and size are ignored here:
// they are never part of a filter.
func FilterFromQuery(q url.Values) (Filter, error) {
	f := Filter{
		Kind: Kind(q.Get("kind")), Status: Status(q.Get("status")),
		DateFrom: q.Get("date_from"), DateTo: q.Get("date_to"), Keyword: q.Get("keyword"),
	}
	var err error
	if f.EnterpriseID, err = optInt(q, "enterprise_id"); err != nil {
		return f, err
	}
	if f.AppID, err = optInt(q, "app_id"); err != nil {
		return f, err
	}
	return f, f.Validate()
}

// Query is the filter as URL values (for links that keep it).
func (f Filter) Query() url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.EnterpriseID > 0 {
		q.Set("enterprise_id", strconv.FormatInt(f.EnterpriseID, 10))
	}
	if f.AppID > 0 {
		q.Set("app_id", strconv.FormatInt(f.AppID, 10))
	}
	set("kind", string(f.Kind))
	set("status", string(f.Status))
	set("date_from", f.DateFrom)
	set("date_to", f.DateTo)
	set("keyword", f.Keyword)
	return q
}

func optInt(q url.Values, key string) (int64, error) {
	s := strings.TrimSpace(q.Get(key))
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s %q is not a positive integer", key, s)
	}
	return n, nil
}
