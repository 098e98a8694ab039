package smpp

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// maxPreBind is how many PDUs other than a bind an unbound peer may send
// (each request answered with ESME_RINVBNDSTS) before it is dropped, so a
// peer cannot keep an unbound socket busy.
const maxPreBind = 8

// maxUnboundPDU limits what an unauthenticated peer can make us allocate.
// The largest bind is 98 bytes; a bigger PDU before the bind is answered
// with generic_nack ESME_RINVCMDLEN and the socket closed.
const maxUnboundPDU = 512

var errBindRefused = errors.New("smpp: bind refused")

// bind reads PDUs until a bind, authenticates it and answers bind_resp.
// Any error closes the connection; BindTimeout bounds the whole phase.
func (c *Conn) bind() error {
	deadline := time.Now().Add(c.srv.cfg.BindTimeout)
	c.nc.SetReadDeadline(deadline)
	defer c.nc.SetReadDeadline(time.Time{})
	for strays := 0; strays <= maxPreBind; strays++ {
		frame, err := ReadFrame(c.br, maxUnboundPDU)
		if err != nil {
			return c.bindReadErr(frame, err)
		}
		h, p, err := Decode(frame)
		switch {
		case bindTypeOf(h.Command) != 0:
			return c.bindWith(deadline, h, p, err)
		case strays == maxPreBind:
			// dropped below, unanswered
		case h.Command.IsResponse():
			c.log.Warn("smpp response before bind, ignored", "command", h.Command.String(), "seq", h.Seq)
		default:
			status := StatusInvBndSts
			if errors.Is(err, ErrUnknownCommand) {
				status = StatusInvCmdID
			}
			if err := c.writeDirect(h.Seq, c.respFor(h.Command, status)); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("%w: %d PDUs without a bind", errBindRefused, maxPreBind+1)
}

func (c *Conn) bindWith(deadline time.Time, h Header, p PDU, err error) error {
	t := bindTypeOf(h.Command)
	if err != nil {
		c.refuseBind(h.Seq, t, StatusOf(err))
		return err
	}
	b := p.(*Bind)
	ctx, cancel := context.WithDeadline(c.s.Context(), deadline)
	defer cancel()
	acct, status, err := c.authenticate(ctx, b)
	if err != nil {
		c.refuseBind(h.Seq, t, status)
		return err
	}
	c.bindType, c.systemID, c.ifVersion, c.account = t, b.SystemID, b.InterfaceVersion, *acct
	resp := &BindResp{Type: t, SystemID: c.srv.cfg.SystemID}
	if b.InterfaceVersion >= InterfaceVersion34 {
		// Announced only to 3.4 ESMEs: older ones must not see TLVs.
		resp.TLVs = TLVs{{Tag: TagSCInterfaceVersion, Value: []byte{InterfaceVersion34}}}
	}
	return c.writeDirect(h.Seq, resp)
}

// authenticate maps Authenticate's answer to a bind_resp status.
func (c *Conn) authenticate(ctx context.Context, b *Bind) (*Account, uint32, error) {
	acct, err := c.srv.cfg.Authenticate(ctx, b.SystemID, b.Password)
	if err == nil && acct != nil {
		return acct, StatusOK, nil
	}
	status := StatusBindFail
	switch {
	case errors.Is(err, ErrInvalidPassword):
		status = StatusInvPaswd
	case err == nil || errors.Is(err, ErrInvalidSystemID):
		status = StatusInvSysID
	}
	if err == nil {
		err = ErrInvalidSystemID
	}
	return nil, status, fmt.Errorf("%w (%s) for system_id %q: %w", errBindRefused, StatusName(status), b.SystemID, err)
}

func (c *Conn) refuseBind(seq uint32, t BindType, status uint32) {
	if err := c.writeDirect(seq, bindRefusal(t, c.srv.cfg.SystemID, status)); err != nil {
		c.log.Debug("smpp bind_resp not sent", "err", err)
	}
}

// bindRefusal carries no body, as SMPP intends for error responses,
// except for bind_transceiver_resp: common ESME libraries read its
// system_id whatever the status (and reject a body on the other two).
func bindRefusal(t BindType, systemID string, status uint32) *BindResp {
	r := &BindResp{Type: t, Status: status}
	if t == BindTransceiver {
		r.SystemID = systemID
	}
	return r
}

// bindReadErr nacks a bad command_length; other read errors (the peer
// hung up, BindTimeout passed) just end the attempt.
func (c *Conn) bindReadErr(frame []byte, err error) error {
	var de *DecodeError
	if errors.As(err, &de) {
		return c.badFrame(frame, err, c.writeDirect)
	}
	return fmt.Errorf("waiting for bind: %w", err)
}
