package keelsql

import (
	"encoding/json"
	"time"
)

// Element is what an Array may hold.
type Element interface {
	~int64 | ~int | ~string | time.Time
}

// Array is a list passed as one statement argument, written the same way in
// a module's Go for both databases:
//
//	rows, err := db.Query(ctx, q.Get("RecordsByIDs"), keelsql.ArrayOf(ids))
//
// On PostgreSQL it is bound as a native array (read it with
// `= ANY($1::bigint[])` or `unnest($1::text[])`); on SQLite, which has no
// arrays, as JSON text (read it with `json_each(?1)`), times as unix
// microseconds like every other SQLite time. A nil slice is an empty list
// on both.
type Array struct {
	pg     any    // the slice for pgx, never nil
	sqlite string // JSON for SQLite
}

// ArrayOf makes an Array of v.
func ArrayOf[T Element](v []T) Array {
	if len(v) == 0 {
		return Array{pg: []T{}, sqlite: "[]"}
	}
	var b []byte
	var err error
	switch t := any(v).(type) {
	case []time.Time:
		micros := make([]int64, len(t))
		utc := make([]time.Time, len(t))
		for i, x := range t {
			micros[i], utc[i] = x.UnixMicro(), x.UTC()
		}
		b, err = json.Marshal(micros)
		if err == nil {
			return Array{pg: utc, sqlite: string(b)}
		}
	default:
		b, err = json.Marshal(v)
	}
	if err != nil {
		panic("keelsql: encoding an array of numbers or strings: " + err.Error()) // cannot happen
	}
	return Array{pg: v, sqlite: string(b)}
}

// pgxArgs binds Arrays as native arrays.
func pgxArgs(args []any) []any {
	out := args
	for i, a := range args {
		arr, ok := a.(Array)
		if !ok {
			if p, isPtr := a.(*Array); isPtr && p != nil {
				arr, ok = *p, true
			}
		}
		if !ok {
			continue
		}
		if &out[0] == &args[0] {
			out = append([]any(nil), args...)
		}
		out[i] = arr.pg
		if arr.pg == nil {
			out[i] = []string{}
		}
	}
	return out
}
