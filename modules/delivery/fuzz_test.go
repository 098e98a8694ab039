package delivery

import (
	"net/url"
	"testing"
)

// FuzzFilterQuery: any query string either yields a valid filter or an
// error; a valid filter survives its own URL form, builds eight query
// arguments, and never carries paging.
func FuzzFilterQuery(f *testing.F) {
	for _, s := range []string{
		"enterprise_id=1&app_id=2&kind=report&status=pending&date_from=2026-08-12&date_to=2026-08-13&keyword=abc",
		"page=3&size=50", "status=awaiting_ack", "date_from=2026-13-40", "keyword=%25_%5C", "app_id=-1", "kind=x",
		"date_from=2026-08-14&date_to=2026-08-12",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		fl, err := FilterFromQuery(q)
		if err != nil {
			return
		}
		if err := fl.Validate(); err != nil {
			t.Fatalf("a parsed filter does not validate: %v", err)
		}
		again, err := FilterFromQuery(fl.Query())
		if err != nil || again != fl {
			t.Fatalf("round trip: %+v -> %+v (%v)", fl, again, err)
		}
		if args := fl.args(nil); len(args) != 8 {
			t.Fatalf("%d arguments", len(args))
		}
		if fl.Query().Has("page") || fl.Query().Has("size") {
			t.Fatal("paging leaked into the filter")
		}
	})
}
