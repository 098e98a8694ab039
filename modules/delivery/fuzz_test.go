package delivery

import (
	"net/url"
	"testing"
)

// FuzzParseAck: any customer answer yields exactly one verdict per pushed
// item, and an item is delivered only when the body acknowledges that id
// with code 0 under a top-level code 0.
func FuzzParseAck(f *testing.F) {
	for _, s := range []string{
		`{"code":0,"acks":[{"id":"1","code":0},{"id":"2","code":9}]}`,
		`{"code":7}`, `{"acks":[{"id":"1","code":0}]}`, `[]`, `null`, ``, `{"code":0,"acks":[{"id":"1"}]}`,
		`{"code":0,"acks":[{"id":"1","code":0},{"id":"1","code":5}]}`, `{"code":0} trailing`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ids := []string{"1", "2", "3"}
		v := parseAck(body, ids)
		if len(v) != len(ids) {
			t.Fatalf("%d verdicts for %d items", len(v), len(ids))
		}
		for _, id := range ids {
			x, ok := v[id]
			if !ok {
				t.Fatalf("no verdict for %s", id)
			}
			switch x.status {
			case StatusDelivered:
				if x.result == nil || *x.result != 0 || x.class != "" {
					t.Fatalf("delivered without a zero ACK: %+v", x)
				}
			case StatusRejected:
				if x.class == "" || x.err == "" {
					t.Fatalf("rejected without class or error: %+v", x)
				}
			default:
				t.Fatalf("status %s from a 2xx answer", x.status)
			}
		}
	})
}

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
