// Package cmppclient is the client side of a CMPP connection through
// gocmpp, the client library the platform's customers use. Two parts of the
// delivery module are CMPP clients: the carrier link (the platform
// connecting to its carrier) and the customer simulator (sim); both dial
// through a Session.
package cmppclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	gocmpp "github.com/bigwhite/gocmpp"
)

// Session is a client-side CMPP connection. One goroutine reads (and owns
// closing the connection, so gocmpp's connection state is never touched
// by two goroutines at once), one writes; responses to requests are
// matched by sequence id, including a response that arrives before the
// request's sequence id was known.
type Session struct {
	cli    *gocmpp.Client
	ver    gocmpp.Type
	handle func(s *Session, pkt any) // server requests and unmatched packets, on the reader goroutine

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

var ErrClosed = errors.New("cmppclient: CMPP session closed")

// Dial connects and authenticates; handle gets every packet that
// is not a response to one of our requests.
func Dial(addr, user, secret string, ver gocmpp.Type, timeout time.Duration, handle func(*Session, any)) (*Session, error) {
	cli := gocmpp.NewClient(ver)
	if err := cli.Connect(addr, user, secret, timeout); err != nil {
		return nil, fmt.Errorf("connecting to %s as %s: %w", addr, user, err)
	}
	s := &Session{cli: cli, ver: ver, handle: handle, out: make(chan outPkt, 64), stopW: make(chan struct{}), done: make(chan struct{}),
		waits: map[uint32]chan any{}, early: map[uint32]any{}}
	writerDone := make(chan struct{})
	go s.writeLoop(writerDone)
	go s.readLoop(writerDone)
	return s, nil
}

func (s *Session) readLoop(writerDone chan struct{}) {
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
func (s *Session) dispatch(pkt any) bool {
	switch p := pkt.(type) {
	case *gocmpp.CmppActiveTestReqPkt:
		s.Respond(&gocmpp.CmppActiveTestRspPkt{}, p.SeqId)
		return false
	case *gocmpp.CmppTerminateReqPkt:
		s.Respond(&gocmpp.CmppTerminateRspPkt{}, p.SeqId)
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

func (s *Session) answered(seq uint32, pkt any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.waits[seq]; ok {
		delete(s.waits, seq)
		ch <- pkt
		return
	}
	s.early[seq] = pkt
}

func (s *Session) writeLoop(done chan struct{}) {
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

// Respond queues a response to a server request; after the session ended
// it is dropped.
func (s *Session) Respond(pkt gocmpp.Packer, seq uint32) {
	select {
	case s.out <- outPkt{pkt: pkt, seq: seq, resp: true}:
	case <-s.stopW:
	}
}

// Request sends pkt and waits for its response.
func (s *Session) Request(ctx context.Context, pkt gocmpp.Packer) (any, error) {
	reply := make(chan sent, 1)
	select {
	case s.out <- outPkt{pkt: pkt, reply: reply}:
	case <-s.stopW:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var r sent
	select {
	case r = <-reply:
	case <-s.done:
		return nil, ErrClosed
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
		return nil, ErrClosed
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.waits, r.seq)
		s.mu.Unlock()
		return nil, ctx.Err()
	}
}

// Close ends the session with TERMINATE and waits for the reader.
func (s *Session) Close(timeout time.Duration) error {
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
		return fmt.Errorf("cmppclient: CMPP session did not end within %s", timeout)
	}
}

// Done is closed when the session ended and its connection is closed.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the session ended; nil before Done is closed.
func (s *Session) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}
