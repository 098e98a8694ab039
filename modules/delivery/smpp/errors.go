package smpp

import (
	"errors"
	"fmt"

	"github.com/keelwork/keel/modules/delivery/internal/gwconn"
)

// Codec errors. Decode wraps one of them in a *DecodeError.
var (
	// ErrTooLarge: command_length exceeds MaxPDUSize.
	ErrTooLarge = errors.New("smpp: pdu too large")
	// ErrLength: command_length, sm_length or a TLV length disagrees with
	// the bytes present.
	ErrLength = errors.New("smpp: bad pdu length")
	// ErrMalformed: a field holds a value the specification does not allow.
	ErrMalformed = errors.New("smpp: malformed pdu")
	// ErrUnknownCommand: a command_id this package does not decode.
	ErrUnknownCommand = errors.New("smpp: unknown command id")
	// ErrNotReceipt: DeliverSM.Receipt on a deliver_sm whose esm_class does
	// not mark a delivery receipt.
	ErrNotReceipt = errors.New("smpp: deliver_sm is not a delivery receipt")
)

// Authentication errors. Config.Authenticate returns them (wrapped or
// not) to choose the bind_resp status.
var (
	// ErrInvalidSystemID is answered with ESME_RINVSYSID.
	ErrInvalidSystemID = errors.New("smpp: unknown system_id")
	// ErrInvalidPassword is answered with ESME_RINVPASWD.
	ErrInvalidPassword = errors.New("smpp: wrong password")
)

// Connection and server errors.
var (
	// ErrWindowFull wraps the context error when Conn.Deliver gave up
	// waiting for a free window slot.
	ErrWindowFull = errors.New("smpp: delivery window full")
	// ErrNotReceiver: Conn.Deliver on a transmitter bind, which by the
	// specification may not receive deliver_sm.
	ErrNotReceiver = errors.New("smpp: a transmitter bind cannot receive deliver_sm")
	// ErrConnClosed: the connection ended (or is unbinding) before the PDU
	// was written.
	ErrConnClosed = errors.New("smpp: connection closed")
	// ErrServerClosed: Start after Close; also the Disconnected error of
	// connections Close had to drop.
	ErrServerClosed = errors.New("smpp: server closed")
	// ErrPeerClosed is the Disconnected error when the ESME closed the
	// socket without an unbind exchange.
	ErrPeerClosed = errors.New("smpp: peer closed the connection")
	// ErrEnquireLinkTimeout is the Disconnected error when the peer stayed
	// silent through EnquireLinkMisses enquire_links in a row.
	ErrEnquireLinkTimeout = errors.New("smpp: peer did not answer enquire_link")
)

// DecodeError says which field of which PDU failed and the command_status
// the specification would answer it with, so the server can respond with
// a precise status instead of dropping the connection.
type DecodeError struct {
	Command CommandID
	Field   string
	Status  uint32
	Err     error // wraps ErrLength, ErrTooLarge, ErrMalformed or ErrUnknownCommand
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("smpp: decoding %s field %s: %v", e.Command, e.Field, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// StatusOf is the command_status for a decode error: the DecodeError's,
// or ESME_RSYSERR for anything else.
func StatusOf(err error) uint32 {
	var de *DecodeError
	if errors.As(err, &de) {
		return de.Status
	}
	return StatusSysErr
}

// sessionErrors are this package's values for what gwconn reports.
var sessionErrors = gwconn.Errors{ConnClosed: ErrConnClosed, WindowFull: ErrWindowFull,
	ServerClosed: ErrServerClosed, PeerClosed: ErrPeerClosed}
