package keelevents

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"time"

	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelsql/sqlfile"
)

//go:embed queries migration
var files embed.FS

// LineName is the name of the events migration line.
const LineName = "events"

var queries = map[string]sqlfile.Set{
	"postgres": sqlfile.MustLoad(files, "queries/postgres"),
	"sqlite":   sqlfile.MustLoad(files, "queries/sqlite"),
}

// Line returns the events migration line for dialect ("postgres" or
// "sqlite"), to migrate after the engine line and before any module that
// emits or consumes events.
func Line(dialect string) keelmigrate.Line {
	sub, err := fs.Sub(files, "migration/"+dialect)
	if err != nil {
		panic(fmt.Sprintf("keelevents: no migrations for dialect %q", dialect))
	}
	return keelmigrate.Line{Name: LineName, FS: sub}
}

// dialect holds a database's statements and argument conventions.
type dialect struct {
	pg bool
	q  sqlfile.Set
}

func newDialect(name string) (dialect, error) {
	q, ok := queries[name]
	if !ok {
		return dialect{}, fmt.Errorf("keelevents: unsupported dialect %q", name)
	}
	return dialect{pg: name == "postgres", q: q}, nil
}

func (d dialect) sql(name string) string {
	s, ok := d.q[name]
	if !ok {
		panic("keelevents: no statement " + name)
	}
	return s
}

// ints passes a list: a PostgreSQL array, or JSON for SQLite's json_each.
func (d dialect) ints(v []int) any {
	if v == nil {
		v = []int{}
	}
	if d.pg {
		out := make([]int32, len(v))
		for i, x := range v {
			out[i] = int32(x)
		}
		return out
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// strings passes a list of text: a PostgreSQL array, or JSON.
func (d dialect) strings(v []string) any {
	if v == nil {
		v = []string{}
	}
	if d.pg {
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func (d dialect) int64s(v []int64) any {
	if v == nil {
		v = []int64{}
	}
	if d.pg {
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// now is the time written to the database: UTC at microsecond precision,
// which both dialects store exactly.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func encodeHeaders(h map[string]string) string {
	if len(h) == 0 {
		return "{}"
	}
	b, _ := json.Marshal(h)
	return string(b)
}

func decodeHeaders(s string) (map[string]string, error) {
	if s == "" || s == "{}" {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(s), &h); err != nil {
		return nil, fmt.Errorf("decoding headers: %w", err)
	}
	return h, nil
}

// inboxRows passes a batch's inbox rows to InboxInsertMany: a column per
// array on PostgreSQL (unnest), one JSON array of rows on SQLite
// (json_each).
func (d dialect) inboxRows(consumer string, ws []*waiting, at time.Time) []any {
	if d.pg {
		var topics, ids, digests, keys, payloads = make([]string, len(ws)), make([]string, len(ws)),
			make([]string, len(ws)), make([]string, len(ws)), make([]string, len(ws))
		attempts := make([]int32, len(ws))
		for i, w := range ws {
			topics[i], ids[i], digests[i], keys[i], payloads[i] = w.d.Topic, w.d.ID, w.digest, w.d.Key, string(w.d.Payload)
			attempts[i] = int32(w.d.Attempt)
		}
		return []any{consumer, topics, ids, digests, keys, payloads, attempts, at}
	}
	rows := make([][]any, len(ws))
	for i, w := range ws {
		rows[i] = []any{w.d.Topic, w.d.ID, w.digest, w.d.Key, string(w.d.Payload), w.d.Attempt}
	}
	b, _ := json.Marshal(rows)
	return []any{consumer, string(b), at}
}
