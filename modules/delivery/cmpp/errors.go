package cmpp

import (
	"errors"

	"github.com/keelwork/keel/modules/delivery/internal/gwconn"
)

// Codec errors. Decode wraps one of them with the field that failed.
var (
	// ErrTooLarge: Total_Length exceeds the largest legal PDU of the version.
	ErrTooLarge = errors.New("cmpp: pdu too large")
	// ErrLength: Total_Length, a count or Msg_Length disagrees with the bytes present.
	ErrLength = errors.New("cmpp: bad pdu length")
	// ErrMalformed: a field holds a value the layout does not allow.
	ErrMalformed = errors.New("cmpp: malformed pdu")
	// ErrUnknownCommand: a Command_Id this package does not handle.
	ErrUnknownCommand = errors.New("cmpp: unknown command id")
	// ErrUnsupportedVersion: a version byte other than 0x20, 0x21 or 0x30.
	ErrUnsupportedVersion = errors.New("cmpp: unsupported version")
)

// Connection and server errors.
var (
	// ErrWindowFull wraps the context error when Conn.Deliver gave up
	// waiting for a free window slot.
	ErrWindowFull = errors.New("cmpp: delivery window full")
	// ErrConnClosed: the connection ended before the PDU was written.
	ErrConnClosed = errors.New("cmpp: connection closed")
	// ErrServerClosed: Start after Close; also the Disconnected error of
	// connections Close had to drop.
	ErrServerClosed = errors.New("cmpp: server closed")
	// ErrPeerClosed is the Disconnected error when the client closed the
	// socket without a TERMINATE exchange.
	ErrPeerClosed = errors.New("cmpp: peer closed the connection")
	// ErrActiveTestTimeout is the Disconnected error when the peer missed
	// ActiveTestMisses link tests in a row.
	ErrActiveTestTimeout = errors.New("cmpp: peer did not answer active tests")
)

// sessionErrors are this package's values for what gwconn reports.
var sessionErrors = gwconn.Errors{ConnClosed: ErrConnClosed, WindowFull: ErrWindowFull,
	ServerClosed: ErrServerClosed, PeerClosed: ErrPeerClosed}
