// Package framewriter is the single writer of a gateway connection's
// encoded PDUs, kept apart from the CMPP server side so that any gateway
// protocol can use it: one goroutine
// owns the socket's writes so frames never interleave, each write has a
// deadline, and a write that fails ends the connection.
package framewriter

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// ErrStopped is returned for frames handed over after the writer stopped.
var ErrStopped = errors.New("framewriter: writer stopped")

type frame struct {
	b    []byte
	done chan error
}

// Writer writes frames to one connection in order.
type Writer struct {
	nc      net.Conn
	timeout time.Duration
	onError func(error)
	out     chan *frame
	stop    chan struct{}
	done    chan struct{}
}

// New builds a writer for nc with room for queue frames; onError is called
// once with the first failed write (the caller aborts the connection).
func New(nc net.Conn, queue int, timeout time.Duration, onError func(error)) *Writer {
	return &Writer{nc: nc, timeout: timeout, onError: onError, out: make(chan *frame, queue),
		stop: make(chan struct{}), done: make(chan struct{})}
}

// Run writes until Stop, then writes what is already queued and returns.
func (w *Writer) Run() {
	defer close(w.done)
	for {
		select {
		case f := <-w.out:
			if !w.write(f) {
				return
			}
		case <-w.stop:
			w.drain()
			return
		}
	}
}

// Stop ends Run after the queued frames and waits for it.
func (w *Writer) Stop() {
	close(w.stop)
	<-w.done
}

func (w *Writer) drain() {
	for {
		select {
		case f := <-w.out:
			if !w.write(f) {
				return
			}
		default:
			return
		}
	}
}

func (w *Writer) write(f *frame) bool {
	_ = w.nc.SetWriteDeadline(time.Now().Add(w.timeout))
	_, err := w.nc.Write(f.b)
	if f.done != nil {
		f.done <- err
	}
	if err != nil {
		w.onError(fmt.Errorf("writing pdu: %w", err))
		return false
	}
	return true
}

func (w *Writer) enqueue(f *frame) error {
	select {
	case w.out <- f:
		return nil
	case <-w.done:
		return ErrStopped
	}
}

// Send queues b without waiting for the write.
func (w *Writer) Send(b []byte) error { return w.enqueue(&frame{b: b}) }

// SendWait queues b and returns once it is written or cannot be.
func (w *Writer) SendWait(b []byte) error {
	f := &frame{b: b, done: make(chan error, 1)}
	if err := w.enqueue(f); err != nil {
		return err
	}
	select {
	case err := <-f.done:
		return err
	case <-w.done:
		select {
		case err := <-f.done: // written just before the writer stopped
			return err
		default:
			return ErrStopped
		}
	}
}
