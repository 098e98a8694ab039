package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// NewRecord is a delivery record to create at ingestion.
type NewRecord struct {
	Kind         Kind
	AppID        int64
	EnterpriseID int64
	SubmitID     *int64
	MsgID        string
	Phone        string
	Payload      any // nil = incomplete
	UpstreamKey  string
	Status       Status // default pending
	CreatedAt    time.Time
}

// insertRecord creates a record; false when its upstream key exists
// already (a repeated report or MO is ingested once).
func (s *store[TTx]) insertRecord(ctx context.Context, q keelsql.Querier, n *NewRecord) (int64, bool, error) {
	var payload *string
	if n.Payload != nil {
		b, err := json.Marshal(n.Payload)
		if err != nil {
			return 0, false, fmt.Errorf("encoding payload: %w", err)
		}
		p := string(b)
		payload = &p
	}
	st := n.Status
	if st == "" {
		st = StatusPending
	}
	at := n.CreatedAt
	if at.IsZero() {
		at = now()
	}
	hist := "[" + event{At: at, Event: "created", Detail: string(st)}.json() + "]"
	var id int64
	err := q.QueryRow(ctx, s.q.Get("RecordInsert"), string(n.Kind), n.AppID, n.EnterpriseID, n.SubmitID, n.MsgID,
		n.Phone, payload, n.UpstreamKey, string(st), hist, at).Scan(&id)
	if isNoRows(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("inserting record %s: %w", n.UpstreamKey, err)
	}
	return id, true, nil
}

func (s *store[TTx]) record(ctx context.Context, id int64) (*Record, error) {
	r, err := scanRecord(s.db.QueryRow(ctx, s.q.Get("RecordGet"), id))
	if err != nil {
		return nil, fmt.Errorf("reading record %d: %w", id, err)
	}
	return r, nil
}

// recordsByIDs returns the records with their application and
// enterprise names, newest first; missing ids are left out.
func (s *store[TTx]) recordsByIDs(ctx context.Context, ids []int64) ([]*Record, error) {
	rows, err := s.db.Query(ctx, s.q.Get("RecordsByIDs"), jsonList(ids))
	return keelsql.CollectRows(rows, err, scanRecordView)
}

func (s *store[TTx]) recordIDsByMsgID(ctx context.Context, msgID string) ([]int64, error) {
	rows, err := s.db.Query(ctx, s.q.Get("RecordIDsByMsgID"), msgID)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (int64, error) {
		var id int64
		return id, r.Scan(&id)
	})
}

// claim is the start of an attempt.
type claim struct {
	ID       int64
	From     []Status // statuses the attempt may start from
	Version  int64    // 0: any version
	Sender   string
	Token    string
	JobID    int64
	BatchID  int64
	ConnID   string
	OuterID  string // the DELIVER's outer Msg_Id, allocated before writing
	Deadline time.Time
}

// claimRecord moves the record to awaiting_ack for this attempt. It
// returns ErrNoRows (test with isNoRows) when the record is not in one of
// From (or not at Version): someone else moved it first.
func (s *store[TTx]) claimRecord(ctx context.Context, c *claim) (*Record, error) {
	at := now()
	ev := event{At: at, Event: "claimed", By: c.Sender, Conn: c.ConnID, Detail: c.Token}
	return scanRecord(s.db.QueryRow(ctx, s.q.Get("RecordClaim"), c.ID, jsonList(c.From), c.Version, c.Sender,
		c.Token, c.JobID, c.BatchID, c.ConnID, c.OuterID, c.Deadline, at, ev.json()))
}

func (s *store[TTx]) setSeq(ctx context.Context, id int64, token string, seq int64) error {
	if _, err := s.db.Exec(ctx, s.q.Get("RecordSetSeq"), id, token, seq); err != nil {
		return fmt.Errorf("recording sequence of record %d: %w", id, err)
	}
	return nil
}

// revert undoes a claim whose DELIVER was never written.
func (s *store[TTx]) revert(ctx context.Context, id int64, token, why string) (bool, error) {
	at := now()
	var v int64
	err := s.db.QueryRow(ctx, s.q.Get("RecordRevert"), id, token, at,
		event{At: at, Event: "reverted", Detail: why}.json()).Scan(&v)
	if isNoRows(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reverting record %d: %w", id, err)
	}
	return true, nil
}

// outcome concludes one attempt.
type outcome struct {
	ID     int64  `json:"id"`
	Token  string `json:"token"`
	Status Status `json:"status"`
	Error  string `json:"error"`
	Class  string `json:"class"`
	Result *int64 `json:"result"`
	Seq    *int64 `json:"seq"`
	Acked  bool   `json:"acked"`
	Event  event  `json:"event"`
}

// finishMany applies outcomes in one statement and returns the ids whose
// record changed (the others were concluded already, or re-claimed).
func (s *store[TTx]) finishMany(ctx context.Context, outs []outcome) (map[int64]bool, error) {
	at := now()
	for i := range outs {
		o := &outs[i]
		o.Event = event{At: at, Event: string(o.Status), Conn: o.Event.Conn, Seq: o.Seq, Result: o.Result,
			Class: o.Class, Detail: o.Error}
	}
	raw, err := json.Marshal(outs)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, s.q.Get("RecordFinishMany"), string(raw), at)
	ids, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (int64, error) {
		var id, v int64
		return id, r.Scan(&id, &v)
	})
	if err != nil {
		return nil, fmt.Errorf("concluding %d attempts: %w", len(outs), err)
	}
	done := make(map[int64]bool, len(ids))
	for _, id := range ids {
		done[id] = true
	}
	return done, nil
}

// failUnsent marks a pending record failed without calling the gateway.
func (s *store[TTx]) failUnsent(ctx context.Context, id, version int64, msg, class string) (bool, error) {
	at := now()
	var v int64
	err := s.db.QueryRow(ctx, s.q.Get("RecordFailUnsent"), id, version, msg, class, at,
		event{At: at, Event: "failed", Class: class, Detail: msg}.json()).Scan(&v)
	if isNoRows(err) {
		return false, nil
	}
	return err == nil, err
}

// requeueRecord moves a record back to pending (single or page requeue)
// from an allowed status as of version; false when it moved meanwhile.
func (s *store[TTx]) requeueRecord(ctx context.Context, q keelsql.Querier, id, version int64, by, reason string) (bool, error) {
	at := now()
	var v int64
	err := q.QueryRow(ctx, s.q.Get("RecordRequeue"), id, version, jsonList(RequeueStatuses), at,
		event{At: at, Event: "requeued", By: by, Detail: reason}.json()).Scan(&v)
	if isNoRows(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("requeueing record %d: %w", id, err)
	}
	return true, nil
}

func (s *store[TTx]) appendHistory(ctx context.Context, id int64, e event) error {
	_, err := s.db.Exec(ctx, s.q.Get("RecordHistoryAppend"), id, e.json())
	return err
}

// bulkRecord is one record of insertMany.
type bulkRecord struct {
	Kind         Kind            `json:"kind"`
	AppID        int64           `json:"app_id"`
	EnterpriseID int64           `json:"enterprise_id"`
	SubmitID     *int64          `json:"submit_id"`
	MsgID        string          `json:"msg_id"`
	Phone        string          `json:"phone"`
	Payload      json.RawMessage `json:"payload"`
	UpstreamKey  string          `json:"upstream_key"`
}

// insertMany creates pending records in one statement and returns their
// ids by upstream key.
func (s *store[TTx]) insertMany(ctx context.Context, q keelsql.Querier, recs []bulkRecord) (map[string]int64, error) {
	raw, err := json.Marshal(recs)
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, s.q.Get("RecordInsertMany"), string(raw), now())
	type got struct {
		id, app int64
		key     string
	}
	out, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (got, error) {
		var g got
		return g, r.Scan(&g.id, &g.app, &g.key)
	})
	if err != nil {
		return nil, fmt.Errorf("inserting %d records: %w", len(recs), err)
	}
	ids := make(map[string]int64, len(out))
	for _, g := range out {
		ids[g.key] = g.id
	}
	return ids, nil
}
