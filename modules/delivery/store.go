package delivery

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsql/sqlfile"
	"github.com/keelwork/keel/module"
)

//go:embed queries/postgres/*.sql queries/sqlite/*.sql
var queryFiles embed.FS

// store runs the module's SQL: one statement set per dialect, the same Go.
type store[TTx any] struct {
	db keelsql.DB[TTx]
	q  sqlfile.Set
}

func newStore[TTx any](db keelsql.DB[TTx]) (*store[TTx], error) {
	set, err := module.LoadQueries(queryFiles, "queries", db.Dialect())
	if err != nil {
		return nil, fmt.Errorf("delivery: %w", err)
	}
	return &store[TTx]{db: db, q: set}, nil
}

// txOf is the module's transaction type on TTx.
type txOf[TTx any] = keelsql.Tx[TTx]

// now is the module's clock: UTC at microsecond precision, the precision
// both dialects store.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

type scanner interface{ Scan(dest ...any) error }

// recordDest lists the scan destinations of the record columns, in the
// order every record query selects them.
func recordDest(r *Record) []any {
	return []any{&r.ID, &r.Kind, &r.AppID, &r.EnterpriseID, &r.SubmitID, &r.MsgID, &r.Phone, &r.Payload,
		&r.UpstreamKey, &r.Status, &r.PrevStatus, &r.Version, &r.Attempts, &r.LastError, &r.LastErrorClass,
		&r.Sender, &r.SendToken, &r.SendJobID, &r.SendBatchID, &r.ConnID, &r.Seq, &r.DeliverMsgID,
		&r.AckDeadline, &r.SentAt, &r.AckedAt, &r.AckResult, &r.History, &r.CreatedAt, &r.UpdatedAt}
}

func scanRecord(s scanner) (*Record, error) {
	r := &Record{}
	var payload, history []byte
	dest := recordDest(r)
	dest[7], dest[26] = &payload, &history
	if err := s.Scan(dest...); err != nil {
		return nil, err
	}
	r.Payload, r.History = copyJSON(payload), copyJSON(history)
	return r, nil
}

func scanRecordView(s keelsql.Rows) (*Record, error) {
	r := &Record{}
	var payload, history []byte
	dest := recordDest(r)
	dest[7], dest[26] = &payload, &history
	dest = append(dest, &r.AppName, &r.Account, &r.EnterpriseName)
	if err := s.Scan(dest...); err != nil {
		return nil, err
	}
	r.Payload, r.History = copyJSON(payload), copyJSON(history)
	return r, nil
}

// copyJSON detaches scanned bytes from the driver's buffer.
func copyJSON(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

func jsonList[T any](v []T) string {
	if v == nil {
		return "[]"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// isNoRows reports a conditional statement that matched nothing.
func isNoRows(err error) bool { return errors.Is(err, keelsql.ErrNoRows) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
