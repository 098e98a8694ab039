package smpp

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/keelwork/keel/modules/delivery/internal/gwconn"
)

// Defaults. The enquire_link figures follow the CMPP server's C, T and N
// so both protocols detect dead links alike.
const (
	DefaultAddr               = ":2775"
	DefaultSystemID           = "keel"
	DefaultEnquireLinkIdle    = 3 * time.Minute
	DefaultEnquireLinkTimeout = 60 * time.Second
	DefaultEnquireLinkMisses  = 3
	DefaultWindow             = 16
	DefaultAckTimeout         = 60 * time.Second
	DefaultBindTimeout        = 30 * time.Second
	DefaultWriteTimeout       = 30 * time.Second
)

// Config configures a Server. Zero values take the defaults named on
// each field.
type Config struct {
	// Addr is the listen address; default ":2775", SMPP's registered port.
	Addr string
	// SystemID names this SMSC in bind responses; at most 15 bytes.
	// Default "keel".
	SystemID string
	// NodeID prefixes every message_id. Give each gateway instance its own.
	NodeID uint16
	// Authenticate checks a bind's system_id and password (compare with
	// crypto/subtle). Return ErrInvalidSystemID or ErrInvalidPassword
	// (or a nil account) to refuse with that status; any other error is
	// answered with ESME_RBINDFAIL. The connection is closed after a
	// refusal. Required.
	Authenticate func(ctx context.Context, systemID, password string) (*Account, error)
	// Handler receives connections, submits and acknowledgements. Required.
	Handler Handler
	// EnquireLinkIdle: with nothing received for this long, the server
	// sends enquire_link. Default 3m.
	EnquireLinkIdle time.Duration
	// EnquireLinkTimeout: how long to wait for any PDU after an
	// enquire_link before sending the next one. Default 60s.
	EnquireLinkTimeout time.Duration
	// EnquireLinkMisses: unanswered enquire_links in a row before the
	// connection is dropped. Default 3.
	EnquireLinkMisses int
	// Window is the number of unanswered deliver_sm per connection, and
	// also the number of submit_sm handled at once per connection.
	// Default 16.
	Window int
	// AckTimeout: a deliver_sm without deliver_sm_resp for this long frees
	// its window slot and is reported to an AckTimeoutHandler. Default 60s.
	AckTimeout time.Duration
	// BindTimeout bounds the time from accepting a socket to a successful
	// bind, Authenticate included. Default 30s.
	BindTimeout time.Duration
	// WriteTimeout bounds writing one PDU; a peer that does not read for
	// this long is dropped. Default 30s.
	WriteTimeout time.Duration
	// Logger receives connection events and protocol errors. Default
	// slog.Default().
	Logger *slog.Logger
}

// Account is what Authenticate returns for a successful bind.
type Account struct {
	AppID string
}

func (c Config) withDefaults() (Config, error) {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.SystemID == "" {
		c.SystemID = DefaultSystemID
	}
	for _, d := range []struct {
		p   *time.Duration
		def time.Duration
	}{
		{&c.EnquireLinkIdle, DefaultEnquireLinkIdle}, {&c.EnquireLinkTimeout, DefaultEnquireLinkTimeout},
		{&c.AckTimeout, DefaultAckTimeout}, {&c.BindTimeout, DefaultBindTimeout}, {&c.WriteTimeout, DefaultWriteTimeout},
	} {
		if *d.p == 0 {
			*d.p = d.def
		}
	}
	if c.EnquireLinkMisses == 0 {
		c.EnquireLinkMisses = DefaultEnquireLinkMisses
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, c.validate()
}

// session is what each connection's gwconn.Session runs on.
func (c Config) session() gwconn.Config {
	return gwconn.Config{Window: c.Window, WriteTimeout: c.WriteTimeout, AckTimeout: c.AckTimeout,
		LinkIdle: c.EnquireLinkIdle, LinkTimeout: c.EnquireLinkTimeout, LinkMisses: c.EnquireLinkMisses, Errors: sessionErrors}
}

func (c Config) validate() error {
	var errs []error
	if len(c.SystemID) > 15 {
		errs = append(errs, fmt.Errorf("SystemID %q is longer than 15 bytes", c.SystemID))
	}
	durations := map[string]time.Duration{"EnquireLinkIdle": c.EnquireLinkIdle, "EnquireLinkTimeout": c.EnquireLinkTimeout,
		"AckTimeout": c.AckTimeout, "BindTimeout": c.BindTimeout, "WriteTimeout": c.WriteTimeout}
	return gwconn.Limits{Authenticate: c.Authenticate != nil, Handler: c.Handler != nil, Durations: durations,
		MissesName: "EnquireLinkMisses", Misses: c.EnquireLinkMisses, Window: c.Window}.Validate("smpp", errs...)
}
