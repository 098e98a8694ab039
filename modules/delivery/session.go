package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	gocmpp "github.com/bigwhite/gocmpp"
)

// session is a client-side CMPP connection through gocmpp, the customer
// client library our customers use: the customer simulator and the
// upstream carrier link are both clients. One goroutine reads (and owns
// closing the connection, so gocmpp's connection state is never touched
// by two goroutines at once), one writes; responses to requests are
// matched by sequence id, including a response that arrives before the
// request's sequence id was known.
type session struct {
	cli    *gocmpp.Client
	ver    gocmpp.Type
	handle func(s *session, pkt any) // server requests and unmatched packets, on the reader goroutine

	out   chan outPkt
	stopW chan struct{} // closed when the reader stopped: the writer exits
	done  chan struct{} // closed when the reader stopped and the connection is closed
	err   error         // why the reader stopped; read after done

	mu    sync.Mutex
	waits map[uint32]chan any
	early map[uint32]any
}

type outPkt struct {
	pkt   gocmpp.Packer
	seq   uint32 // responses: the request's sequence id
	resp  bool
	reply chan sent // requests: the sequence id used
}

type sent struct {
	seq uint32
	err error
}

var errSessionClosed = errors.New("delivery: CMPP session closed")

// dialSession connects and authenticates; handle gets every packet that
// is not a response to one of our requests.
func dialSession(addr, user, secret string, ver gocmpp.Type, timeout time.Duration, handle func(*session, any)) (*session, error) {
	cli := gocmpp.NewClient(ver)
	if err := cli.Connect(addr, user, secret, timeout); err != nil {
		return nil, fmt.Errorf("connecting to %s as %s: %w", addr, user, err)
	}
	s := &session{cli: cli, ver: ver, handle: handle, out: make(chan outPkt, 64), stopW: make(chan struct{}), done: make(chan struct{}),
		waits: map[uint32]chan any{}, early: map[uint32]any{}}
	writerDone := make(chan struct{})
	go s.writeLoop(writerDone)
	go s.readLoop(writerDone)
	return s, nil
}

func (s *session) readLoop(writerDone chan struct{}) {
	for {
		pkt, err := s.cli.RecvAndUnpackPkt(0)
		if err != nil {
			s.err = err
			break
		}
		if s.dispatch(pkt) {
			break
		}
	}
	close(s.stopW)
	<-writerDone
	s.cli.Disconnect()
	close(s.done)
}

// dispatch routes one packet; true ends the session (TERMINATE).
func (s *session) dispatch(pkt any) bool {
	switch p := pkt.(type) {
	case *gocmpp.CmppActiveTestReqPkt:
		s.respond(&gocmpp.CmppActiveTestRspPkt{}, p.SeqId)
		return false
	case *gocmpp.CmppTerminateReqPkt:
		s.respond(&gocmpp.CmppTerminateRspPkt{}, p.SeqId)
		return true
	case *gocmpp.CmppTerminateRspPkt:
		return true
	}
	if seq, ok := respSeq(pkt); ok {
		s.answered(seq, pkt)
		return false
	}
	s.handle(s, pkt)
	return false
}

// respSeq names the responses to requests the client sends.
func respSeq(pkt any) (uint32, bool) {
	switch p := pkt.(type) {
	case *gocmpp.Cmpp2SubmitRspPkt:
		return p.SeqId, true
	case *gocmpp.Cmpp3SubmitRspPkt:
		return p.SeqId, true
	case *gocmpp.CmppActiveTestRspPkt:
		return p.SeqId, true
	}
	return 0, false
}

func (s *session) answered(seq uint32, pkt any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.waits[seq]; ok {
		delete(s.waits, seq)
		ch <- pkt
		return
	}
	s.early[seq] = pkt
}

func (s *session) writeLoop(done chan struct{}) {
	defer close(done)
	for {
		select {
		case o := <-s.out:
			if o.resp {
				_ = s.cli.SendRspPkt(o.pkt, o.seq)
				continue
			}
			seq, err := s.cli.SendReqPkt(o.pkt)
			o.reply <- sent{seq: seq, err: err}
		case <-s.stopW:
			return
		}
	}
}

// respond queues a response to a server request; after the session ended
// it is dropped.
func (s *session) respond(pkt gocmpp.Packer, seq uint32) {
	select {
	case s.out <- outPkt{pkt: pkt, seq: seq, resp: true}:
	case <-s.stopW:
	}
}

// request sends pkt and waits for its response.
func (s *session) request(ctx context.Context, pkt gocmpp.Packer) (any, error) {
	reply := make(chan sent, 1)
	select {
	case s.out <- outPkt{pkt: pkt, reply: reply}:
	case <-s.stopW:
		return nil, errSessionClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var r sent
	select {
	case r = <-reply:
	case <-s.done:
		return nil, errSessionClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if r.err != nil {
		return nil, r.err
	}
	ch := make(chan any, 1)
	s.mu.Lock()
	if p, ok := s.early[r.seq]; ok {
		delete(s.early, r.seq)
		s.mu.Unlock()
		return p, nil
	}
	s.waits[r.seq] = ch
	s.mu.Unlock()
	select {
	case p := <-ch:
		return p, nil
	case <-s.done:
		return nil, errSessionClosed
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.waits, r.seq)
		s.mu.Unlock()
		return nil, ctx.Err()
	}
}

// close ends the session with TERMINATE and waits for the reader.
func (s *session) close(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	select {
	case s.out <- outPkt{pkt: &gocmpp.CmppTerminateReqPkt{}, reply: make(chan sent, 1)}:
	case <-s.stopW:
	case <-ctx.Done():
	}
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("delivery: CMPP session did not end within %s", timeout)
	}
}
