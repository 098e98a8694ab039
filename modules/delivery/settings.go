package delivery

import (
	"fmt"
	"strconv"
	"time"
)

// Setting defaults. Every setting is "delivery.<name>" in the host's
// Settings; docs/delivery.md lists them.
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
	s := settings{
		CMPPAddr: DefaultCMPPAddr, AckTimeout: DefaultAckTimeout, Window: DefaultWindow, Workers: DefaultWorkers,
		ConnectionWait: DefaultConnectionWait, HTTPTimeout: DefaultHTTPTimeout, HTTPBatch: DefaultHTTPBatch,
		AckInline: DefaultAckInline, Heartbeat: DefaultHeartbeat, OneSender: true,
	}
	get := func(k string) (string, bool) {
		v, ok := m["delivery."+k]
		return v, ok && v != ""
	}
	if v, ok := m["delivery.cmpp_addr"]; ok {
		s.CMPPAddr = v
	}
	s.Instance, _ = get("instance")
	s.UpstreamAddr, _ = get("upstream_addr")
	s.UpstreamUser, _ = get("upstream_account")
	s.UpstreamSecret, _ = get("upstream_secret")
	if v, ok := get("one_sender"); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("delivery.one_sender %q: want true or false", v)
		}
		s.OneSender = b
	}
	if v, ok := get("gateway_id"); ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n > 1<<22-1 {
			return s, fmt.Errorf("delivery.gateway_id %q: want an integer below %d", v, 1<<22)
		}
		s.GatewayID = uint32(n)
	}
	for _, d := range []struct {
		key string
		dst *time.Duration
	}{{"ack_timeout", &s.AckTimeout}, {"connection_wait", &s.ConnectionWait}, {"http_timeout", &s.HTTPTimeout},
		{"ack_inline", &s.AckInline}, {"heartbeat", &s.Heartbeat}} {
		if v, ok := get(d.key); ok {
			x, err := time.ParseDuration(v)
			if err != nil || x < 0 || (x == 0 && d.key != "ack_inline") {
				return s, fmt.Errorf("delivery.%s %q: want a positive duration", d.key, v)
			}
			*d.dst = x
		}
	}
	for _, n := range []struct {
		key string
		dst *int
	}{{"window", &s.Window}, {"workers", &s.Workers}, {"http_batch", &s.HTTPBatch}} {
		if v, ok := get(n.key); ok {
			x, err := strconv.Atoi(v)
			if err != nil || x < 1 {
				return s, fmt.Errorf("delivery.%s %q: want a positive integer", n.key, v)
			}
			*n.dst = x
		}
	}
	if s.AckInline >= s.AckTimeout {
		// The inline wait must end before the ACK deadline, so that a
		// slow ACK is visibly awaited (waiting_ack).
		s.AckInline = s.AckTimeout / 2
	}
	return s, nil
}
