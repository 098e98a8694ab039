package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/keelwork/keel/modules/delivery/cmpp"
)

// httpConnID is the connection id of HTTP attempts.
const httpConnID = "http"

// buildDeliver is the DELIVER of a record: a status report carrying the
// original submit's Msg_Id, or the MO under its own Msg_Id.
func buildDeliver(rec *Record, app *Application, outer cmpp.MsgID) (*cmpp.Deliver, error) {
	switch rec.Kind {
	case KindReport:
		var p ReportPayload
		if err := json.Unmarshal(rec.Payload, &p); err != nil {
			return nil, fmt.Errorf("record %d: report payload: %w", rec.ID, err)
		}
		inner, err := strconv.ParseUint(rec.MsgID, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("record %d: message id %q is not a Msg_Id", rec.ID, rec.MsgID)
		}
		r := &cmpp.Report{MsgID: cmpp.MsgID(inner), Stat: p.Stat, SubmitTime: p.SubmitTime, DoneTime: p.DoneTime,
			DestTerminalID: p.DestTerminal, SMSCSequence: p.SMSCSequence}
		if app.ReportCompat {
			r.Layout = cmpp.V20
		}
		return &cmpp.Deliver{MsgID: outer, DestID: p.DestID, SrcTerminalID: p.DestTerminal, Report: r}, nil
	case KindMO:
		var p MOPayload
		if err := json.Unmarshal(rec.Payload, &p); err != nil {
			return nil, fmt.Errorf("record %d: MO payload: %w", rec.ID, err)
		}
		return &cmpp.Deliver{MsgID: outer, DestID: p.DestID, ServiceID: p.ServiceID, MsgFmt: p.MsgFmt,
			SrcTerminalID: rec.Phone, Content: p.Content}, nil
	}
	return nil, fmt.Errorf("record %d: kind %q", rec.ID, rec.Kind)
}

// pushItem is the HTTP form of a record.
func pushItem(rec *Record) (PushItem, error) {
	it := PushItem{ID: itoa(rec.ID), Type: rec.Kind, MsgID: rec.MsgID, Phone: rec.Phone, Attempt: rec.Attempts,
		CreatedAt: rec.CreatedAt}
	switch rec.Kind {
	case KindReport:
		it.Report = &ReportPayload{}
		return it, json.Unmarshal(rec.Payload, it.Report)
	case KindMO:
		it.MO = &MOPayload{}
		return it, json.Unmarshal(rec.Payload, it.MO)
	}
	return it, fmt.Errorf("record %d: kind %q", rec.ID, rec.Kind)
}

// sendHTTP queues the claimed record on the application's HTTP sender and
// waits for the request's answer.
func (m *Module[TTx]) sendHTTP(ctx context.Context, r *pushReq, app *Application) error {
	a, rec, err := m.begin(ctx, r, httpConnID, "")
	if err != nil {
		return err
	}
	item, err := pushItem(rec)
	if err != nil {
		m.acks.conclude(a, outcome{Status: StatusFailed, Class: ClassEncode, Error: err.Error()})
	} else {
		m.enqueueHTTP(app, a, item)
	}
	return m.await(ctx, r, a, rec, m.set.HTTPTimeout+2*time.Second)
}

// onAck concludes a CMPP attempt from its DELIVER_RESP: success only when
// the result is 0 and the echoed Msg_Id is the one written.
func (m *Module[TTx]) onAck(a *attempt, e earlyAck) {
	seq, result := int64(a.seq), int64(e.result)
	o := outcome{Seq: &seq, Result: &result, Acked: true}
	switch {
	case e.msgID != a.outer:
		o.Status, o.Class = StatusRejected, ClassInvalidMsgID
		o.Error = fmt.Sprintf("DELIVER_RESP echoes Msg_Id %d, the DELIVER carried %d", e.msgID, a.outer)
	case e.result == 0:
		o.Status = StatusDelivered
	default:
		o.Status, o.Class = StatusRejected, ClassAckRejected
		o.Error = fmt.Sprintf("DELIVER_RESP result %d", e.result)
	}
	m.acks.conclude(a, o)
}

// failUnsent records why a pending record will not be pushed.
func (m *Module[TTx]) failUnsent(ctx context.Context, rec *Record, code string) {
	msg, ok := unsentReasons[code]
	if !ok {
		return
	}
	if _, err := m.st.failUnsent(ctx, rec.ID, rec.Version, msg, code); err != nil {
		m.log.Warn("delivery: marking record failed", "record", rec.ID, "err", err)
	}
}

var unsentReasons = map[string]string{
	SkipAppDisabled:     "the application or its delivery capability is disabled",
	SkipIncompleteData:  "the record has no replayable payload",
	SkipNoSubmitMapping: "the original Submit mapping is missing",
}
