package cmpp_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	gocmpp "github.com/bigwhite/gocmpp"

	"github.com/keelwork/keel/modules/delivery/cmpp"
)

type deliverResult struct {
	seq uint32
	err error
}

// Sixteen unanswered DELIVERs fill the window: the 17th waits (and gives
// up with ErrWindowFull when its context ends) until an ACK frees a slot.
func TestDeliverWindowOf16(t *testing.T) {
	srv, rec := startServer(t, nil)
	c := mustDial(t, srv, gocmpp.V30, "901234")
	conn := next(t, rec.connected, "Connected")
	ids := map[uint32]uint64{}
	for range cmpp.DefaultWindow {
		if _, err := conn.Deliver(t.Context(), report(conn.NewMsgID())); err != nil {
			t.Fatal(err)
		}
		seq, id := c.deliverSeq()
		ids[seq] = id
	}
	if conn.InFlight() != 16 {
		t.Fatalf("in flight %d", conn.InFlight())
	}

	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := conn.Deliver(short, report(1))
	if !errors.Is(err, cmpp.ErrWindowFull) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("17th with a short deadline: %v, want ErrWindowFull", err)
	}

	done := make(chan deliverResult, 1)
	go func() {
		seq, err := conn.Deliver(context.Background(), report(2))
		done <- deliverResult{seq, err}
	}()
	none(t, c.pkts, "a 17th DELIVER before any ACK")
	none(t, done, "17th Deliver returning before any ACK")

	var first uint32
	for seq := range ids {
		first = seq
		break
	}
	c.ack(first, ids[first], 0)
	next(t, rec.acks, "DeliverResp")
	r := next(t, done, "17th Deliver")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if seq, _ := c.deliverSeq(); seq != r.seq {
		t.Errorf("17th DELIVER on the wire has seq %d, Deliver returned %d", seq, r.seq)
	}
	if conn.InFlight() != 16 {
		t.Errorf("in flight %d after one ACK and one more DELIVER", conn.InFlight())
	}
}

// A DELIVER without ACK frees its slot after AckTimeout and is reported as
// a timeout; an ACK arriving after that is reported as late.
func TestDeliverAckTimeout(t *testing.T) {
	srv, rec := startServer(t, func(cfg *cmpp.Config) {
		cfg.Window = 1
		cfg.AckTimeout = 100 * time.Millisecond
	})
	c := mustDial(t, srv, gocmpp.V30, "901234")
	conn := next(t, rec.connected, "Connected")
	d := report(conn.NewMsgID())
	seq, err := conn.Deliver(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	c.deliverSeq() // read, stay silent

	// The window of one is full; this Deliver can only proceed once the
	// timeout frees the slot.
	bounded, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	seq2, err := conn.Deliver(bounded, report(conn.NewMsgID()))
	if err != nil {
		t.Fatalf("slot not freed by the ack timeout: %v", err)
	}
	to := next(t, rec.timeouts, "AckTimeout")
	if to.seq != seq || to.msgID != d.MsgID || to.conn != conn {
		t.Errorf("timeout %+v, want seq %d msgID %s", to, seq, d.MsgID)
	}
	c.deliverSeq()

	c.ack(seq, uint64(d.MsgID), 0)
	late := next(t, rec.late, "LateDeliverResp")
	if late.seq != seq || late.msgID != d.MsgID || late.resp.Result != 0 {
		t.Errorf("late %+v", late)
	}
	none(t, rec.acks, "DeliverResp for a timed-out DELIVER")

	c.ack(seq2, 0, 0)
	if ack := next(t, rec.acks, "DeliverResp"); ack.seq != seq2 {
		t.Errorf("ack seq %d, want %d", ack.seq, seq2)
	}
}

// Many concurrent Deliver calls through a small window, the client ACKing
// as it reads: every DELIVER is acknowledged exactly once.
func TestDeliverConcurrent(t *testing.T) {
	srv, rec := startServer(t, func(cfg *cmpp.Config) { cfg.Window = 4 })
	c := mustDial(t, srv, gocmpp.V20, "901234")
	conn := next(t, rec.connected, "Connected")
	const senders, each = 4, 25
	go func() { // acks as a customer would; reports problems without FailNow
		for range senders * each {
			p, ok := (<-c.pkts).(*gocmpp.Cmpp2DeliverReqPkt)
			if !ok {
				t.Error("expected a 2.0 DELIVER")
				return
			}
			if err := c.cli.SendRspPkt(&gocmpp.Cmpp2DeliverRspPkt{MsgId: p.MsgId}, p.SeqId); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	sent := make(chan uint32, senders*each)
	for range senders {
		wg.Go(func() {
			for range each {
				seq, err := conn.Deliver(t.Context(), report(conn.NewMsgID()))
				if err != nil {
					t.Error(err)
					return
				}
				sent <- seq
			}
		})
	}
	wg.Wait()
	close(sent)
	want := map[uint32]bool{}
	for seq := range sent {
		want[seq] = true
	}
	for range senders * each {
		ack := next(t, rec.acks, "DeliverResp")
		if !want[ack.seq] {
			t.Fatalf("ack for unknown or repeated seq %d", ack.seq)
		}
		delete(want, ack.seq)
	}
}
