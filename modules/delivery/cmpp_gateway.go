package delivery

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/modules/delivery/cmpp"
)

// gateway is the module's side of the CMPP server: customers' connections
// become links (and presence), their SUBMITs become Submit mappings, and
// their DELIVER_RESPs conclude attempts.
type gateway[TTx any] struct {
	m *Module[TTx]

	mu   sync.Mutex
	late map[string]map[uint32]int64 // timed-out DELIVERs per connection → record, for late ACK evidence
}

var (
	_ cmpp.Handler           = (*gateway[any])(nil)
	_ cmpp.AckTimeoutHandler = (*gateway[any])(nil)
	_ cmpp.LateAckHandler    = (*gateway[any])(nil)
	_ cmpp.SubmitRespHandler = (*gateway[any])(nil)
)

// lateMemory bounds the timed-out DELIVERs remembered per connection.
const lateMemory = 256

func (m *Module[TTx]) startGateway(ctx context.Context) error {
	if m.set.CMPPAddr == "" || m.set.CMPPAddr == "off" {
		return nil
	}
	g := &gateway[TTx]{m: m, late: map[string]map[uint32]int64{}}
	srv, err := cmpp.NewServer(cmpp.Config{
		Addr: m.set.CMPPAddr, GatewayID: m.set.GatewayID, Authenticate: g.authenticate, Handler: g,
		Window: m.set.Window, AckTimeout: m.set.AckTimeout, Location: Beijing, Logger: m.log,
	})
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	m.srv = srv
	return nil
}

// authenticate accepts an enabled CMPP application by its account.
func (g *gateway[TTx]) authenticate(ctx context.Context, source string) (*cmpp.Account, error) {
	app, ok := g.m.apps.account(source)
	if !ok {
		// Created on another instance since the last refresh?
		if err := g.m.refreshApps(ctx); err != nil {
			return nil, err
		}
		if app, ok = g.m.apps.account(source); !ok {
			return nil, nil
		}
	}
	if !app.Enabled() || !app.Protocol.CMPP() {
		return nil, nil
	}
	acct := &cmpp.Account{AppID: itoa(app.ID), Secret: app.Secret}
	if app.ReportCompat {
		acct.ReportLayout = cmpp.V20
	}
	return acct, nil
}

func appIDOf(c *cmpp.Conn) int64 {
	id, _ := strconv.ParseInt(c.AppID(), 10, 64)
	return id
}

// Connected: the application is now held here. Its waiting jobs are woken
// now and twice more shortly after, for jobs that parked while the
// connection came up.
func (g *gateway[TTx]) Connected(c *cmpp.Conn) {
	m := g.m
	appID := appIDOf(c)
	m.links.add(appID, c)
	m.recomputeKeys()
	m.kickBeat()
	// In the module's run, so Stop waits for it: a wake after the host
	// closed the engine would only fail.
	m.base.Life.Go(func(run context.Context) {
		ctx, cancel := context.WithCancel(run)
		defer cancel()
		go func() {
			select {
			case <-c.Done():
			case <-ctx.Done():
			}
			cancel()
		}()
		for _, d := range []time.Duration{0, time.Second, 3 * time.Second} {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return
			}
			m.wakeConnected(ctx, appID)
		}
	})
}

// Disconnected: the connection's outstanding DELIVERs can no longer be
// acknowledged; they end unconfirmed now rather than at their deadline.
func (g *gateway[TTx]) Disconnected(c *cmpp.Conn, err error) {
	m := g.m
	m.links.remove(appIDOf(c), c.ID())
	for _, a := range m.track.dropConn(c.ID()) {
		m.acks.conclude(a, outcome{Status: StatusUnconfirmed, Class: ClassConnClosed,
			Error: "the connection closed before the DELIVER_RESP"})
	}
	g.mu.Lock()
	delete(g.late, c.ID())
	g.mu.Unlock()
	m.recomputeKeys()
	m.kickBeat()
}

// DeliverResp concludes the attempt written with seq on c.
func (g *gateway[TTx]) DeliverResp(c *cmpp.Conn, seq uint32, resp *cmpp.DeliverResp) {
	e := earlyAck{msgID: uint64(resp.MsgID), result: resp.Result, at: time.Now()}
	if a := g.m.track.take(c.ID(), seq, true, e); a != nil {
		g.m.onAck(a, e)
	}
}

// AckTimeout: no DELIVER_RESP within the ACK timeout.
func (g *gateway[TTx]) AckTimeout(c *cmpp.Conn, seq uint32, msgID cmpp.MsgID) {
	a := g.m.track.take(c.ID(), seq, false, earlyAck{})
	if a == nil {
		return
	}
	g.remember(c.ID(), seq, a.recordID)
	s := int64(seq)
	g.m.acks.conclude(a, outcome{Status: StatusUnconfirmed, Class: ClassAckTimeout, Seq: &s,
		Error: "no DELIVER_RESP within " + g.m.set.AckTimeout.String()})
}

func (g *gateway[TTx]) remember(conn string, seq uint32, recordID int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.late[conn]
	if m == nil {
		m = map[uint32]int64{}
		g.late[conn] = m
	}
	if len(m) >= lateMemory {
		for k := range m {
			delete(m, k)
			break
		}
	}
	m[seq] = recordID
}

// LateDeliverResp keeps a response that came after the timeout as
// evidence on the record; the attempt stays unconfirmed.
func (g *gateway[TTx]) LateDeliverResp(c *cmpp.Conn, seq uint32, msgID cmpp.MsgID, resp *cmpp.DeliverResp) {
	g.mu.Lock()
	id, ok := g.late[c.ID()][seq]
	delete(g.late[c.ID()], seq)
	g.mu.Unlock()
	if !ok {
		return
	}
	s, r := int64(seq), int64(resp.Result)
	e := event{At: now(), Event: "late_ack", Conn: c.ID(), Seq: &s, Result: &r,
		Detail: "DELIVER_RESP after the ACK timeout; the attempt stays unconfirmed"}
	if err := g.m.st.appendHistory(context.Background(), id, e); err != nil {
		g.m.log.Warn("delivery: recording a late ACK", "record", id, "err", err)
	}
}

// Submit records the original Submit mapping under the Msg_Id the server
// allocated. It is forwarded upstream only once the SUBMIT_RESP carrying
// that Msg_Id is written (SubmitRespWritten), so no report can reach the
// customer before the Msg_Id it refers to.
func (g *gateway[TTx]) Submit(ctx context.Context, c *cmpp.Conn, msgID cmpp.MsgID, s *cmpp.Submit) uint32 {
	app, ok := g.m.apps.get(appIDOf(c))
	if !ok || !app.Enabled() {
		return cmpp.ResultOther
	}
	if len(s.DestTerminalIDs) == 0 {
		return cmpp.ResultBadDestTerminal
	}
	// Phones are stored comma-joined: a number with a comma is malformed.
	if strings.Contains(strings.Join(s.DestTerminalIDs, ""), ",") {
		return cmpp.ResultBadDestTerminal
	}
	sub := &Submit{AppID: app.ID, MsgID: strconv.FormatUint(uint64(msgID), 10), Phones: s.DestTerminalIDs,
		SrcID: s.SrcID, ServiceID: s.ServiceID, MsgFmt: int(s.MsgFmt), Content: s.Content,
		WantReport: s.RegisteredDelivery == 1}
	if _, err := g.m.st.insertSubmit(ctx, g.m.st.db, sub); err != nil {
		g.m.log.Error("delivery: recording a submit", "app", app.ID, "err", err)
		return cmpp.ResultOther
	}
	return cmpp.ResultOK
}

// SubmitRespWritten starts forwarding a submit whose Msg_Id the customer
// now has.
func (g *gateway[TTx]) SubmitRespWritten(c *cmpp.Conn, msgID cmpp.MsgID, result uint32, err error) {
	if result != cmpp.ResultOK || err != nil || g.m.up == nil {
		return
	}
	cl := g.m.client.Load()
	if cl == nil {
		return
	}
	id := strconv.FormatUint(uint64(msgID), 10)
	_, ierr := cl.Insert(context.Background(), ForwardArgs{AppID: appIDOf(c), MsgID: id},
		&keel.InsertOpts{Queue: QueueAux, IdempotencyKey: "forward:" + c.AppID() + ":" + id})
	if ierr != nil {
		g.m.log.Error("delivery: queueing a forward", "msg_id", id, "err", ierr)
	}
}

// kickBeat asks the heartbeat to run now (presence changed).
func (m *Module[TTx]) kickBeat() {
	select {
	case m.beatNow <- struct{}{}:
	default:
	}
}
