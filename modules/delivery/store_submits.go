package delivery

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// Submit is the original Submit mapping of a customer's message.
type Submit struct {
	ID            int64
	AppID         int64
	MsgID         string // decimal Msg_Id returned to the customer
	Phones        []string
	SrcID         string
	ServiceID     string
	MsgFmt        int
	Content       []byte
	WantReport    bool
	UpstreamMsgID *string // the carrier's Msg_Id once forwarded
	UpstreamAt    *time.Time
	CreatedAt     time.Time
}

func scanSubmit(s scanner) (*Submit, error) {
	m := &Submit{}
	var phones string
	err := s.Scan(&m.ID, &m.AppID, &m.MsgID, &phones, &m.SrcID, &m.ServiceID, &m.MsgFmt, &m.Content,
		&m.WantReport, &m.UpstreamMsgID, &m.UpstreamAt, &m.CreatedAt)
	if err != nil {
		return nil, err
	}
	m.Phones = strings.Split(phones, ",")
	return m, nil
}

// insertSubmit records m; false when (app, Msg_Id) exists already.
func (s *store[TTx]) insertSubmit(ctx context.Context, q keelsql.Querier, m *Submit) (bool, error) {
	err := q.QueryRow(ctx, s.q.Get("SubmitInsert"), m.AppID, m.MsgID, strings.Join(m.Phones, ","), m.SrcID,
		m.ServiceID, m.MsgFmt, m.Content, m.WantReport, now()).Scan(&m.ID)
	if isNoRows(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("inserting submit %s: %w", m.MsgID, err)
	}
	return true, nil
}

func (s *store[TTx]) submit(ctx context.Context, id int64) (*Submit, error) {
	return scanSubmit(s.db.QueryRow(ctx, s.q.Get("SubmitGet"), id))
}

func (s *store[TTx]) submitByMsgID(ctx context.Context, appID int64, msgID string) (*Submit, error) {
	return scanSubmit(s.db.QueryRow(ctx, s.q.Get("SubmitByMsgID"), appID, msgID))
}

func (s *store[TTx]) submitByUpstream(ctx context.Context, q keelsql.Querier, upstream string) (*Submit, error) {
	return scanSubmit(q.QueryRow(ctx, s.q.Get("SubmitByUpstream"), upstream))
}

func (s *store[TTx]) setUpstream(ctx context.Context, id int64, upstream string) error {
	n, err := s.db.Exec(ctx, s.q.Get("SubmitSetUpstream"), id, upstream, now())
	if err != nil {
		return fmt.Errorf("recording upstream id of submit %d: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("submit %d already carries another upstream id", id)
	}
	return nil
}

func (s *store[TTx]) deleteSubmit(ctx context.Context, id int64) error {
	_, err := s.db.Exec(ctx, s.q.Get("SubmitDelete"), id)
	return err
}
