package export

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/web"
)

// requestCodes are the stable codes a refused request may carry.
var requestCodes = []string{CodeUnknownColumn, CodeUnknownFilter, CodeUnsupportedFormat, web.CodeInvalidArgument}

// FuzzRequest: any JSON body the API could be sent either decodes and
// normalizes into parameters that hold the module's invariants — known,
// unique columns, a supported format, a known status, a UTC range with
// from before to — and normalize again to the same parameters (so the
// idempotency key is stable), or is refused with one of the stable codes.
// Never a panic, never an unclassified error. Seeds: testdata/fuzz.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		`{"tenant":"t1"}`,
		`{"tenant":"t1","columns":["order_no","status","order_no"],"filters":{"status":" paid "},"format":"CSV"}`,
		`{"tenant":"t1","format":"xlsx","gzip":true,"filters":{"created_from":"2030-01-01T00:00:00+08:00","created_to":"2030-01-02T00:00:00Z"}}`,
		`{"tenant":"t1","columns":["password"]}`,
		`{"tenant":"t1","filters":{"colour":"red"}}`,
		`{"tenant":"t1","format":"pdf"}`,
		`{"tenant":" ","columns":[]}`,
		`{"tenant":"t1","filters":{"created_from":"2031-01-01T00:00:00Z","created_to":"2030-01-01T00:00:00Z"}}`,
		`{"tenant":"t1","columns":[" id "," amount_minor"],"bom":true,"new_version":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r Request
		if json.Unmarshal(body, &r) != nil {
			return
		}
		p, err := normalize(r)
		if err != nil {
			var pe *module.Error
			if !errors.As(err, &pe) || !slices.Contains(requestCodes, pe.Code) {
				t.Fatalf("%s: refused without a stable code: %v", body, err)
			}
			return
		}
		checkParams(t, p)
		again, err := normalize(requestOf(r.Tenant, p))
		if err != nil {
			t.Fatalf("%s: normalized parameters %+v refused: %v", body, p, err)
		}
		if a, b := mustDigest(p), mustDigest(again); a != b {
			t.Fatalf("%s: normalizing twice changed the key: %s / %s", body, a, b)
		}
	})
}

// FuzzNormalize drives normalize with free-form fields (columns comma-
// separated) rather than JSON, to reach the parsers directly.
func FuzzNormalize(f *testing.F) {
	f.Add("t1", "id,order_no", "paid", "2030-01-01T00:00:00Z", "2030-02-01T00:00:00Z", "csv", "")
	f.Add("t1", "", "", "", "", "", "")
	f.Add("t1", "amount_minor, created_at ,id", "refunded", "2030-01-01T00:00:00.5-07:00", "", "XLSX", "")
	f.Add("t1", "id", "lost", "yesterday", "", "csv", "region")
	f.Fuzz(func(t *testing.T, tenant, columns, status, from, to, format, extra string) {
		r := Request{Tenant: tenant, Format: format, Filters: map[string]string{}}
		if columns != "" {
			r.Columns = strings.Split(columns, ",")
		}
		if status != "" {
			r.Filters["status"] = status
		}
		if from != "" {
			r.Filters["created_from"] = from
		}
		if to != "" {
			r.Filters["created_to"] = to
		}
		if extra != "" {
			r.Filters[extra] = "x"
		}
		p, err := normalize(r)
		if err != nil {
			var pe *module.Error
			if !errors.As(err, &pe) || !slices.Contains(requestCodes, pe.Code) {
				t.Fatalf("%+v: refused without a stable code: %v", r, err)
			}
			return
		}
		checkParams(t, p)
		again, err := normalize(requestOf(tenant, p))
		if err != nil || mustDigest(again) != mustDigest(p) {
			t.Fatalf("%+v: not stable under normalization: %+v %v", r, again, err)
		}
	})
}

// FuzzCSVField: the shard's encoder writes exactly encoding/csv's bytes
// (part digests, the unknown-upload settlement and the crash test compare
// bytes), and the read-back counter counts the records encoding/csv reads.
func FuzzCSVField(f *testing.F) {
	for _, s := range []string{"", "plain", "客户12", `Zhang, "Wei" 7`, " lead", "\tx", `\.`, "a\nb", "a\r\nb", `"`, "\u00a0nbsp", "x,"} {
		f.Add(s, "second")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		var want bytes.Buffer
		w := csv.NewWriter(&want)
		_ = w.Write([]string{"h1", "h2"})
		_ = w.Write([]string{a, b})
		_ = w.Write([]string{b, a})
		w.Flush()
		got := []byte("h1,h2\n")
		for _, rec := range [][2]string{{a, b}, {b, a}} {
			got = appendCSVField(got, []byte(rec[0]))
			got = append(got, ',')
			got = appendCSVField(got, []byte(rec[1]))
			got = append(got, '\n')
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("%q %q: encoded %q, encoding/csv %q", a, b, got, want.Bytes())
		}
		n, err := countCSV(bytes.NewReader(got))
		if err != nil || n != 2 {
			t.Fatalf("%q: counted %d rows (%v), want 2", got, n, err)
		}
	})
}

func checkParams(t *testing.T, p Params) {
	t.Helper()
	if p.Format != "csv" && p.Format != "xlsx" {
		t.Fatalf("format %q accepted", p.Format)
	}
	if len(p.Columns) == 0 {
		t.Fatal("no columns")
	}
	for i, c := range p.Columns {
		if !slices.Contains(Columns, c) || slices.Index(p.Columns, c) != i {
			t.Fatalf("columns %q: unknown or repeated %q", p.Columns, c)
		}
	}
	if p.Status != "" && !slices.Contains([]string{"paid", "shipped", "refunded"}, p.Status) {
		t.Fatalf("status %q accepted", p.Status)
	}
	if !p.From.Before(p.To) || p.From.Location().String() != "UTC" || p.To.Location().String() != "UTC" {
		t.Fatalf("range %v .. %v", p.From, p.To)
	}
}

// requestOf is the request that says p again.
func requestOf(tenant string, p Params) Request {
	r := Request{Tenant: tenant, Columns: p.Columns, Format: p.Format, Gzip: p.Gzip, BOM: p.BOM, Filters: map[string]string{}}
	if p.Status != "" {
		r.Filters["status"] = p.Status
	}
	if !p.From.Equal(minTime) {
		r.Filters["created_from"] = p.From.Format("2006-01-02T15:04:05.999999999Z07:00")
	}
	if !p.To.Equal(maxTime) {
		r.Filters["created_to"] = p.To.Format("2006-01-02T15:04:05.999999999Z07:00")
	}
	return r
}

func mustDigest(p Params) string {
	_, d := p.digest()
	return d
}
