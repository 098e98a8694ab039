package httppush

import "testing"

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
		v := ParseAck(body, ids)
		if len(v) != len(ids) {
			t.Fatalf("%d verdicts for %d items", len(v), len(ids))
		}
		for _, id := range ids {
			x, ok := v[id]
			if !ok {
				t.Fatalf("no verdict for %s", id)
			}
			switch x.Status {
			case Delivered:
				if x.Result == nil || *x.Result != 0 || x.Class != "" {
					t.Fatalf("delivered without a zero ACK: %+v", x)
				}
			case Rejected:
				if x.Class == "" || x.Err == "" {
					t.Fatalf("rejected without class or error: %+v", x)
				}
			default:
				t.Fatalf("status %d from a 2xx answer", x.Status)
			}
		}
	})
}
