package delivery

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	cmpputils "github.com/bigwhite/gocmpp/utils"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/modules/delivery/carrierlink"
	"github.com/keelwork/keel/modules/delivery/cmpp"
)

// The carrier's side of the module: what the carrier link
// (package carrierlink) hands over becomes delivery records and their push
// jobs here, and the forward job sends customers' submits up the link.

// newCarrierLink is the module's link to its carrier at addr.
func newCarrierLink[TTx any](m *Module[TTx], addr, user, secret string) *carrierlink.Link {
	return carrierlink.New(carrierlink.Config{Addr: addr, Account: user, Secret: secret, Logger: m.log,
		Report: m.ingestReport,
		MO: func(ctx context.Context, mo *carrierlink.MO) error {
			return m.ingestMO(ctx, mo.UpstreamID, &MOPayload{DestID: mo.DestID, ServiceID: mo.ServiceID, MsgFmt: mo.MsgFmt,
				Content: mo.Content}, mo.Phone)
		}})
}

// ingestReport turns a carrier status report into a delivery record and
// its push job, in one transaction. A report whose submit is not mapped
// yet (it raced the forward's SUBMIT_RESP) is retried by a job.
func (m *Module[TTx]) ingestReport(ctx context.Context, r *cmpp.Report) error {
	if r.Stat == cmpp.StatAccepted {
		return nil // intermediate: the spec says a gateway drops it
	}
	upID := strconv.FormatUint(uint64(r.MsgID), 10)
	sub, err := m.st.submitByUpstream(ctx, m.st.db, upID)
	if isNoRows(err) {
		_, err = m.client.Load().Insert(ctx, IngestArgs{UpstreamMsgID: upID, Stat: r.Stat, SubmitTime: r.SubmitTime,
			DoneTime: r.DoneTime, Dest: r.DestTerminalID, SMSCSequence: r.SMSCSequence, ReceivedAt: now()},
			&keel.InsertOpts{Queue: QueueAux, IdempotencyKey: "ingest:" + upID + ":" + r.DestTerminalID})
		return err
	}
	if err != nil {
		return err
	}
	if !sub.WantReport {
		return nil
	}
	_, _, err = m.createRecord(ctx, m.reportRecord(sub, upID, r.Stat, r.SubmitTime, r.DoneTime, r.DestTerminalID, r.SMSCSequence))
	return err
}

func (m *Module[TTx]) reportRecord(sub *Submit, upID, stat, submitTime, doneTime, dest string, smsc uint32) *NewRecord {
	app, _ := m.apps.get(sub.AppID)
	var ent int64
	if app != nil {
		ent = app.EnterpriseID
	}
	id := sub.ID
	return &NewRecord{Kind: KindReport, AppID: sub.AppID, EnterpriseID: ent, SubmitID: &id, MsgID: sub.MsgID,
		Phone: dest, UpstreamKey: "report:" + upID + ":" + dest,
		Payload: &ReportPayload{DestID: sub.SrcID, Stat: stat, SubmitTime: submitTime, DoneTime: doneTime,
			DestTerminal: dest, SMSCSequence: smsc}}
}

// ingestMO routes an MO by its Dest_Id to an application and records it
// under a Msg_Id of this gateway (the customer's dedupe key).
func (m *Module[TTx]) ingestMO(ctx context.Context, upID string, p *MOPayload, phone string) error {
	app, ok := m.apps.moRoute(p.DestID)
	if !ok {
		m.log.Warn("delivery: MO for no application", "dest_id", p.DestID)
		return nil
	}
	if p.MsgFmt == cmpp.FmtUCS2 {
		if txt, err := cmpputils.Ucs2ToUtf8(string(p.Content)); err == nil {
			p.Text = txt
		}
	} else if p.MsgFmt == cmpp.FmtASCII {
		p.Text = string(p.Content)
	}
	msgID := upID
	if m.srv != nil {
		msgID = strconv.FormatUint(uint64(m.srv.NewMsgID()), 10)
	}
	_, _, err := m.createRecord(ctx, &NewRecord{Kind: KindMO, AppID: app.ID, EnterpriseID: app.EnterpriseID,
		MsgID: msgID, Phone: phone, Payload: p, UpstreamKey: "mo:" + upID})
	return err
}

// createRecord inserts a record and its push job in one transaction; a
// repeated upstream key creates nothing.
func (m *Module[TTx]) createRecord(ctx context.Context, n *NewRecord) (int64, bool, error) {
	var id int64
	var created bool
	err := m.st.db.InTx(ctx, func(tx txOf[TTx]) error {
		var err error
		id, created, err = m.st.insertRecord(ctx, tx, n)
		if err != nil || !created {
			return err
		}
		_, err = m.client.Load().InsertTx(ctx, tx.Native(), PushArgs{DeliveryID: id, AppID: n.AppID, RecordKind: n.Kind, By: "ingest"},
			&keel.InsertOpts{Queue: QueueName, FlowKey: appKey(n.AppID), IdempotencyKey: "push:" + n.UpstreamKey})
		return err
	})
	return id, created, err
}

// ForwardArgs forward one submit to the carrier.
type ForwardArgs struct {
	AppID int64  `json:"app_id"`
	MsgID string `json:"msg_id"`
}

// Kind implements keel.JobArgs.
func (ForwardArgs) Kind() string { return KindForward }

type forwardWorker[TTx any] struct{ m *Module[TTx] }

func (w *forwardWorker[TTx]) Work(ctx context.Context, job *keel.Job[ForwardArgs]) error {
	sub, err := w.m.st.submitByMsgID(ctx, job.Args.AppID, job.Args.MsgID)
	if err != nil {
		return fmt.Errorf("reading submit %s: %w", job.Args.MsgID, err)
	}
	if sub.UpstreamMsgID != nil {
		return nil
	}
	if w.m.up == nil {
		return keel.JobCancel(errors.New("no carrier link configured"))
	}
	id, err := w.m.up.Submit(ctx, &carrierlink.Message{ServiceID: sub.ServiceID, MsgFmt: uint8(sub.MsgFmt), SrcID: sub.SrcID,
		Phones: sub.Phones, Content: sub.Content})
	if errors.Is(err, carrierlink.ErrDown) {
		return keel.JobSnooze(time.Second)
	}
	if err != nil {
		return err
	}
	return w.m.st.setUpstream(ctx, sub.ID, id)
}

// IngestArgs retry a status report that arrived before its submit's
// carrier Msg_Id was recorded.
type IngestArgs struct {
	UpstreamMsgID string    `json:"upstream_msg_id"`
	Stat          string    `json:"stat"`
	SubmitTime    string    `json:"submit_time"`
	DoneTime      string    `json:"done_time"`
	Dest          string    `json:"dest"`
	SMSCSequence  uint32    `json:"smsc_sequence"`
	ReceivedAt    time.Time `json:"received_at"`
}

// Kind implements keel.JobArgs.
func (IngestArgs) Kind() string { return KindIngest }

// ingestPatience is how long an unmatched report keeps looking for its
// submit.
const ingestPatience = 10 * time.Minute

type ingestWorker[TTx any] struct{ m *Module[TTx] }

func (w *ingestWorker[TTx]) Work(ctx context.Context, job *keel.Job[IngestArgs]) error {
	a := job.Args
	sub, err := w.m.st.submitByUpstream(ctx, w.m.st.db, a.UpstreamMsgID)
	if isNoRows(err) {
		if time.Since(a.ReceivedAt) > ingestPatience {
			return keel.JobFail(fmt.Errorf("no submit carries upstream Msg_Id %s", a.UpstreamMsgID))
		}
		return keel.JobSnooze(time.Second)
	}
	if err != nil {
		return err
	}
	if !sub.WantReport {
		return nil
	}
	_, _, err = w.m.createRecord(ctx, w.m.reportRecord(sub, a.UpstreamMsgID, a.Stat, a.SubmitTime, a.DoneTime, a.Dest, a.SMSCSequence))
	return err
}
