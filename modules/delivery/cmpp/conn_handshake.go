package cmpp

import (
	"context"
	"errors"
	"fmt"
	"time"
)

var errAuthFailed = errors.New("cmpp: authentication failed")

// connectLen is the only size a CONNECT has; nothing larger is read from
// an unauthenticated peer.
const connectLen = HeaderLen + 27

// handshake reads CONNECT, authenticates and answers CONNECT_RESP in the
// layout the client's version asks for. Any error closes the connection.
func (c *Conn) handshake() error {
	deadline := time.Now().Add(c.srv.cfg.ConnectTimeout)
	c.nc.SetReadDeadline(deadline)
	defer c.nc.SetReadDeadline(time.Time{})
	h, req, err := c.readConnect()
	if err != nil {
		return err
	}
	if !req.Version.Supported() {
		c.refuse(h.Seq, req.Version, StatusVersionTooHigh)
		return fmt.Errorf("%w: client sent %#x", ErrUnsupportedVersion, uint8(req.Version))
	}
	c.version, c.clientVersion = req.Version.Family(), req.Version
	ctx, cancel := context.WithDeadline(c.s.Context(), deadline)
	defer cancel()
	acct, err := c.authenticate(ctx, req)
	if err != nil {
		c.refuse(h.Seq, req.Version, StatusAuthFailed)
		return err
	}
	if acct.ReportLayout != 0 && !acct.ReportLayout.Supported() {
		c.refuse(h.Seq, req.Version, StatusOtherConnectErr)
		return fmt.Errorf("account %s: report layout %#x is not 0x20 or 0x30", acct.AppID, uint8(acct.ReportLayout))
	}
	c.account, c.reportLayout = *acct, acct.ReportLayout.Family()
	if c.reportLayout == 0 {
		c.reportLayout = c.version
	}
	resp := &ConnectResp{
		Status:            StatusOK,
		AuthenticatorISMG: AuthenticatorISMG(c.version, StatusOK, req.AuthenticatorSource, acct.Secret),
		Version:           req.Version,
	}
	return c.writeDirect(h.Seq, resp)
}

func (c *Conn) readConnect() (Header, *Connect, error) {
	frame, err := ReadFrame(c.br, connectLen)
	if err != nil {
		return Header{}, nil, fmt.Errorf("reading CONNECT: %w", err)
	}
	h, p, err := Decode(V30, frame) // CONNECT is the same in every version
	if err != nil {
		return h, nil, fmt.Errorf("decoding first pdu: %w", err)
	}
	req, ok := p.(*Connect)
	if !ok {
		return h, nil, fmt.Errorf("%w: first pdu is %s, want CONNECT", ErrMalformed, h.Command)
	}
	return h, req, nil
}

func (c *Conn) authenticate(ctx context.Context, req *Connect) (*Account, error) {
	acct, err := c.srv.cfg.Authenticate(ctx, req.SourceAddr)
	if err != nil {
		return nil, fmt.Errorf("%w: looking up %q: %w", errAuthFailed, req.SourceAddr, err)
	}
	if acct == nil {
		return nil, fmt.Errorf("%w: no account for %q", errAuthFailed, req.SourceAddr)
	}
	if !VerifyConnect(req, acct.Secret) {
		return nil, fmt.Errorf("%w: bad AuthenticatorSource for %q", errAuthFailed, req.SourceAddr)
	}
	return acct, nil
}

// refuse answers a failed CONNECT. The AuthenticatorISMG is left empty,
// as the spec allows. An unsupported version is answered in the layout
// its major number suggests, with the highest version we speak.
func (c *Conn) refuse(seq uint32, asked Version, status uint32) {
	layout := asked.Family()
	if layout == 0 {
		layout = V20
		if asked >= V30 {
			layout = V30
		}
	}
	c.version = layout
	resp := &ConnectResp{Status: status, Version: asked}
	if status == StatusVersionTooHigh {
		resp.Version = V30
	}
	if err := c.writeDirect(seq, resp); err != nil {
		c.log.Debug("cmpp connect_resp not sent", "err", err)
	}
}

// writeDirect writes before the writer goroutine exists.
func (c *Conn) writeDirect(seq uint32, p PDU) error {
	b, err := Encode(c.version, seq, p)
	if err != nil {
		return err
	}
	c.nc.SetWriteDeadline(time.Now().Add(c.srv.cfg.WriteTimeout))
	if _, err := c.nc.Write(b); err != nil {
		return fmt.Errorf("writing %s: %w", p.Command(), err)
	}
	return nil
}
