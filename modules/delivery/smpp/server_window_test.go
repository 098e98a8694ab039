package smpp_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/linxGnu/gosmpp/pdu"

	"github.com/keelwork/keel/modules/delivery/smpp"
)

type deliverResult struct {
	seq uint32
	err error
}

// Sixteen unanswered deliver_sm fill the window: the 17th waits (and
// gives up with ErrWindowFull when its context ends) until an ACK frees a
// slot. gosmpp holds its responses because OnAllPDU is set.
func TestDeliverWindowOf16(t *testing.T) {
	srv, rec := startServer(t, nil)
	e := mustDial(t, srv, pdu.Transceiver)
	conn := next(t, rec.connected, "Connected")
	var sent []*pdu.DeliverSM
	for range smpp.DefaultWindow {
		if _, err := conn.Deliver(t.Context(), sampleReceipt(t)); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, recvAs[*pdu.DeliverSM](e))
	}
	if conn.InFlight() != 16 {
		t.Fatalf("in flight %d", conn.InFlight())
	}

	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := conn.Deliver(short, sampleMO()); !errors.Is(err, smpp.ErrWindowFull) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("17th with a short deadline: %v, want ErrWindowFull", err)
	}

	done := make(chan deliverResult, 1)
	go func() {
		seq, err := conn.Deliver(context.Background(), sampleMO())
		done <- deliverResult{seq, err}
	}()
	none(t, e.pdus, "a 17th deliver_sm before any ACK")
	none(t, done, "17th Deliver returning before any ACK")

	e.ack(sent[5], 0)
	if ack := next(t, rec.acks, "DeliverResp"); ack.seq != uint32(sent[5].SequenceNumber) {
		t.Errorf("ack seq %d", ack.seq)
	}
	r := next(t, done, "17th Deliver")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := recvAs[*pdu.DeliverSM](e); uint32(got.SequenceNumber) != r.seq {
		t.Errorf("17th deliver_sm on the wire has seq %d, Deliver returned %d", got.SequenceNumber, r.seq)
	}
	if conn.InFlight() != 16 {
		t.Errorf("in flight %d after one ACK and one more deliver_sm", conn.InFlight())
	}
}

// A deliver_sm without response frees its slot after AckTimeout and is
// reported as a timeout; a response after that is reported as late.
func TestDeliverAckTimeout(t *testing.T) {
	srv, rec := startServer(t, func(cfg *smpp.Config) {
		cfg.Window = 1
		cfg.AckTimeout = 100 * time.Millisecond
	})
	e := mustDial(t, srv, pdu.Transceiver)
	conn := next(t, rec.connected, "Connected")
	seq, err := conn.Deliver(t.Context(), sampleReceipt(t))
	if err != nil {
		t.Fatal(err)
	}
	first := recvAs[*pdu.DeliverSM](e) // read, stay silent

	// The window of one is full; this Deliver can only proceed once the
	// timeout frees the slot.
	bounded, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	if _, err := conn.Deliver(bounded, sampleMO()); err != nil {
		t.Fatalf("slot not freed by the ack timeout: %v", err)
	}
	if to := next(t, rec.timeouts, "AckTimeout"); to.seq != seq || to.conn != conn {
		t.Errorf("timeout %+v, want seq %d", to, seq)
	}
	second := recvAs[*pdu.DeliverSM](e)

	e.ack(first, smpp.StatusOK)
	if late := next(t, rec.late, "LateDeliverResp"); late.seq != seq || late.resp.Status != 0 {
		t.Errorf("late %+v", late)
	}
	none(t, rec.acks, "DeliverResp for a timed-out deliver_sm")
	e.ack(second, smpp.StatusOK)
	if ack := next(t, rec.acks, "DeliverResp"); ack.seq != uint32(second.SequenceNumber) {
		t.Errorf("ack seq %d, want %d", ack.seq, second.SequenceNumber)
	}
}

// Many concurrent Deliver calls through a small window, the ESME acking
// as it reads: every deliver_sm is acknowledged exactly once.
func TestDeliverConcurrent(t *testing.T) {
	srv, rec := startServer(t, func(cfg *smpp.Config) { cfg.Window = 4 })
	e := mustDial(t, srv, pdu.Receiver)
	conn := next(t, rec.connected, "Connected")
	const senders, each = 4, 25
	go func() { // acks as a customer would; reports problems without FailNow
		for range senders * each {
			d, ok := (<-e.pdus).(*pdu.DeliverSM)
			if !ok {
				t.Error("expected a deliver_sm")
				return
			}
			if err := e.sess.Transceiver().Submit(d.GetResponse()); err != nil {
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
				seq, err := conn.Deliver(t.Context(), sampleMO())
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
