package delivery

import (
	"time"

	"github.com/keelwork/keel/module"
)

// Setting defaults. Every setting is "delivery.<name>" in the host's
// Settings; docs/delivery.md lists them with their ranges. An unknown
// "delivery." key is refused (a typo would otherwise leave the default in
// force unnoticed).
const (
	DefaultCMPPAddr       = "127.0.0.1:7890"
	DefaultAckTimeout     = 60 * time.Second
	DefaultWindow         = 16
	DefaultWorkers        = 200
	DefaultConnectionWait = 5 * time.Minute
	DefaultHTTPTimeout    = 10 * time.Second
	DefaultAckInline      = 2 * time.Second
	DefaultHeartbeat      = 2 * time.Second
	DefaultHTTPBatch      = 100
	// QueueName is the engine queue of push jobs and requeue items.
	QueueName = "delivery"
	// QueueAux is the queue of the carrier link's jobs (forwards,
	// delayed ingestion).
	QueueAux = "delivery_aux"
)

// settings are the module's parsed settings.
type settings struct {
	CMPPAddr       string        // cmpp_addr: the gateway's listen address ("" or "off": no gateway)
	GatewayID      uint32        // gateway_id: the Msg_Id gateway field of this instance
	AckTimeout     time.Duration // ack_timeout: a DELIVER's ACK deadline
	Window         int           // window: unanswered DELIVERs per connection
	Workers        int           // workers: concurrent delivery jobs per instance
	ConnectionWait time.Duration // connection_wait: how long a job parks for a connection before it looks again
	HTTPTimeout    time.Duration // http_timeout: one HTTP push request
	HTTPBatch      int           // http_batch: items per HTTP push request
	AckInline      time.Duration // ack_inline: how long a push job holds its slot for a quick ACK before parking
	Heartbeat      time.Duration // heartbeat: presence heartbeat interval
	Instance       string        // instance: this instance's name in the presence table (default: the engine client's id)
	UpstreamAddr   string        // upstream_addr: the carrier to forward submits to ("" = none; the demo runs one)
	UpstreamUser   string        // upstream_account
	UpstreamSecret string        // upstream_secret
	// OneSender (one_sender, default true): one instance sends for each
	// application, so write pacing is exact across instances; false lets
	// every instance holding a connection send (more throughput for an
	// application connected to many instances; the rate still holds at
	// the claim, the customer may see more jitter).
	OneSender bool
}

func parseSettings(m map[string]string) (settings, error) {
	r := module.NewSettings(LineName, m)
	s := settings{
		CMPPAddr:       r.String("cmpp_addr", DefaultCMPPAddr, nil),
		GatewayID:      uint32(r.Int("gateway_id", 0, 0, 1<<22-1)),
		AckTimeout:     r.Duration("ack_timeout", DefaultAckTimeout, time.Millisecond, 24*time.Hour),
		Window:         r.Int("window", DefaultWindow, 1, 4096),
		Workers:        r.Int("workers", DefaultWorkers, 1, 100000),
		ConnectionWait: r.Duration("connection_wait", DefaultConnectionWait, time.Millisecond, 24*time.Hour),
		HTTPTimeout:    r.Duration("http_timeout", DefaultHTTPTimeout, time.Millisecond, time.Hour),
		HTTPBatch:      r.Int("http_batch", DefaultHTTPBatch, 1, 10000),
		AckInline:      r.Duration("ack_inline", DefaultAckInline, 0, time.Hour),
		Heartbeat:      r.Duration("heartbeat", DefaultHeartbeat, time.Millisecond, time.Hour),
		Instance:       r.String("instance", "", nil),
		UpstreamAddr:   r.String("upstream_addr", "", nil),
		UpstreamUser:   r.String("upstream_account", "", nil),
		UpstreamSecret: r.String("upstream_secret", "", nil),
		OneSender:      r.Bool("one_sender", true),
	}
	// The carrier simulator's settings are parsed, with their own checks,
	// by parseSimSettings; here they are only known keys.
	for _, k := range []string{"carrier_sim", "carrier_sim_account", "carrier_sim_secret", "carrier_sim_delay", "carrier_sim_mix"} {
		r.String(k, "", nil)
	}
	if err := r.Err(); err != nil {
		return s, err
	}
	if s.AckInline >= s.AckTimeout {
		// The inline wait must end before the ACK deadline, so that a
		// slow ACK is visibly awaited (waiting_ack).
		s.AckInline = s.AckTimeout / 2
	}
	return s, nil
}
