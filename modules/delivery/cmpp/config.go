package cmpp

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/keelwork/keel/modules/delivery/internal/gwconn"
)

// Defaults, from the spec's recommended C, T, N and W.
const (
	DefaultAddr              = ":7890"
	DefaultActiveTestIdle    = 3 * time.Minute
	DefaultActiveTestTimeout = 60 * time.Second
	DefaultActiveTestMisses  = 3
	DefaultWindow            = 16
	DefaultAckTimeout        = 60 * time.Second
	DefaultConnectTimeout    = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
)

// Config configures a Server. Zero durations and counts take the defaults
// named on each field.
type Config struct {
	// Addr is the listen address; default ":7890", the spec's port for
	// long connections.
	Addr string
	// GatewayID is the 22-bit ISMG id written into every Msg_Id. Give each
	// gateway instance its own id: one id issues 65,536 ids a second.
	GatewayID uint32
	// Authenticate looks up the account for a CONNECT's Source_Addr. A nil
	// account or an error is answered with status 3 (authentication
	// failure) and the connection is closed. Required.
	Authenticate func(ctx context.Context, sourceAddr string) (*Account, error)
	// Handler receives connections, submits and acknowledgements. Required.
	Handler Handler
	// ActiveTestIdle: with nothing received for this long, the server sends
	// ACTIVE_TEST. Default 3m.
	ActiveTestIdle time.Duration
	// ActiveTestTimeout: how long to wait for any PDU after an ACTIVE_TEST
	// before sending the next one. Default 60s.
	ActiveTestTimeout time.Duration
	// ActiveTestMisses: unanswered ACTIVE_TESTs in a row before the
	// connection is dropped. Default 3.
	ActiveTestMisses int
	// Window is the number of unanswered DELIVERs per connection, and also
	// the number of SUBMITs handled at once per connection. Default 16.
	Window int
	// AckTimeout: a DELIVER without DELIVER_RESP for this long frees its
	// window slot and is reported to an AckTimeoutHandler. Default 60s.
	AckTimeout time.Duration
	// ConnectTimeout bounds the handshake: receiving CONNECT and running
	// Authenticate. Default 30s.
	ConnectTimeout time.Duration
	// WriteTimeout bounds writing one PDU; a peer that does not read for
	// this long is dropped. Default 30s.
	WriteTimeout time.Duration
	// Location is the zone of the Msg_Id time fields (the spec means the
	// gateway's local time, China Standard Time). Default time.Local.
	Location *time.Location
	// Logger receives connection events and protocol errors. Default
	// slog.Default().
	Logger *slog.Logger
}

// Account is what Authenticate returns for a Source_Addr.
type Account struct {
	AppID  string
	Secret string
	// ReportLayout forces the status-report layout for this application:
	// V20 for the 60-byte form, V30 for the 71-byte form, 0 to follow the
	// connection's version. It exists because common 3.0 client libraries
	// parse reports with the 60-byte layout.
	ReportLayout Version
}

func (c Config) withDefaults() (Config, error) {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	setDuration(&c.ActiveTestIdle, DefaultActiveTestIdle)
	setDuration(&c.ActiveTestTimeout, DefaultActiveTestTimeout)
	setDuration(&c.AckTimeout, DefaultAckTimeout)
	setDuration(&c.ConnectTimeout, DefaultConnectTimeout)
	setDuration(&c.WriteTimeout, DefaultWriteTimeout)
	if c.ActiveTestMisses == 0 {
		c.ActiveTestMisses = DefaultActiveTestMisses
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Location == nil {
		c.Location = time.Local
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, c.validate()
}

func setDuration(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

// session is what each connection's gwconn.Session runs on.
func (c Config) session() gwconn.Config {
	return gwconn.Config{Window: c.Window, WriteTimeout: c.WriteTimeout, AckTimeout: c.AckTimeout,
		LinkIdle: c.ActiveTestIdle, LinkTimeout: c.ActiveTestTimeout, LinkMisses: c.ActiveTestMisses, Errors: sessionErrors}
}

func (c Config) validate() error {
	var errs []error
	if c.GatewayID > MaxGatewayID {
		errs = append(errs, fmt.Errorf("GatewayID %d exceeds %d", c.GatewayID, MaxGatewayID))
	}
	durations := map[string]time.Duration{"ActiveTestIdle": c.ActiveTestIdle, "ActiveTestTimeout": c.ActiveTestTimeout,
		"AckTimeout": c.AckTimeout, "ConnectTimeout": c.ConnectTimeout, "WriteTimeout": c.WriteTimeout}
	return gwconn.Limits{Authenticate: c.Authenticate != nil, Handler: c.Handler != nil, Durations: durations,
		MissesName: "ActiveTestMisses", Misses: c.ActiveTestMisses, Window: c.Window}.Validate("cmpp", errs...)
}
