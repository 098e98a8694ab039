package delivery

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	gocmpp "github.com/bigwhite/gocmpp"
	cmpputils "github.com/bigwhite/gocmpp/utils"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/modules/delivery/cmpp"
)

// upstream is the platform's link to its carrier: a CMPP 3.0 client
// connection (gocmpp) that forwards customers' submits and receives the
// carrier's status reports and MO messages, which it ingests before
// acknowledging them.
type upstream[TTx any] struct {
	m                  *Module[TTx]
	addr, user, secret string
	mu                 sync.Mutex
	s                  *session
	ingestCtx          context.Context
}

var errNoUpstream = errors.New("delivery: the carrier link is down")

func newUpstream[TTx any](m *Module[TTx], addr, user, secret string) *upstream[TTx] {
	return &upstream[TTx]{m: m, addr: addr, user: user, secret: secret}
}

// run keeps the link up until ctx ends.
func (u *upstream[TTx]) run(ctx context.Context) {
	u.ingestCtx = ctx
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		s, err := dialSession(u.addr, u.user, u.secret, gocmpp.V30, 5*time.Second, u.handle)
		if err != nil {
			u.m.log.Warn("delivery: carrier link", "addr", u.addr, "err", err)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 200 * time.Millisecond
		u.set(s)
		select {
		case <-s.done:
		case <-ctx.Done():
			_ = s.close(5 * time.Second)
		}
		u.set(nil)
	}
}

func (u *upstream[TTx]) set(s *session) {
	u.mu.Lock()
	u.s = s
	u.mu.Unlock()
}

func (u *upstream[TTx]) session() *session {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.s
}

// handle ingests the carrier's DELIVERs on the reader goroutine, then
// acknowledges each (result 9 when it could not be stored, so the carrier
// sends it again).
func (u *upstream[TTx]) handle(s *session, pkt any) {
	p, ok := pkt.(*gocmpp.Cmpp3DeliverReqPkt)
	if !ok {
		return
	}
	var result uint32
	if err := u.ingest(u.ingestCtx, p); err != nil {
		// At a stop the carrier is told to send it again (result 9): not
		// an error of anyone's.
		if u.ingestCtx.Err() != nil {
			u.m.log.Info("delivery: stopping; the carrier will resend a DELIVER", "msg_id", p.MsgId)
		} else {
			u.m.log.Error("delivery: ingesting a carrier DELIVER", "msg_id", p.MsgId, "err", err)
		}
		result = cmpp.ResultOther
	}
	s.respond(&gocmpp.Cmpp3DeliverRspPkt{MsgId: p.MsgId, Result: result}, p.SeqId)
}

func (u *upstream[TTx]) ingest(ctx context.Context, p *gocmpp.Cmpp3DeliverReqPkt) error {
	upID := strconv.FormatUint(p.MsgId, 10)
	if p.RegisterDelivery == 0 {
		return u.m.ingestMO(ctx, upID, &MOPayload{DestID: p.DestId, ServiceID: p.ServiceId, MsgFmt: p.MsgFmt,
			Content: []byte(p.MsgContent)}, p.SrcTerminalId)
	}
	r, err := cmpp.DecodeReport([]byte(p.MsgContent))
	if err != nil {
		return err
	}
	return u.m.ingestReport(ctx, r)
}

// submit forwards one message and returns the carrier's Msg_Id.
func (u *upstream[TTx]) submit(ctx context.Context, sub *Submit) (string, error) {
	s := u.session()
	if s == nil {
		return "", errNoUpstream
	}
	pkt := &gocmpp.Cmpp3SubmitReqPkt{PkTotal: 1, PkNumber: 1, RegisteredDelivery: 1, MsgLevel: 1,
		ServiceId: sub.ServiceID, FeeUserType: 2, MsgFmt: uint8(sub.MsgFmt), MsgSrc: "keel", FeeType: "01",
		SrcId: sub.SrcID, DestUsrTl: uint8(len(sub.Phones)), DestTerminalId: sub.Phones,
		MsgLength: uint8(len(sub.Content)), MsgContent: string(sub.Content)}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := s.request(ctx, pkt)
	if err != nil {
		return "", err
	}
	r, ok := resp.(*gocmpp.Cmpp3SubmitRspPkt)
	if !ok {
		return "", fmt.Errorf("carrier answered SUBMIT with %T", resp)
	}
	if r.Result != 0 {
		return "", fmt.Errorf("carrier refused the submit: result %d", r.Result)
	}
	return strconv.FormatUint(r.MsgId, 10), nil
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
	id, err := w.m.up.submit(ctx, sub)
	if errors.Is(err, errNoUpstream) {
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
