package alarm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// ConsumerConfig configures one MQTT consumer session.
type ConsumerConfig struct {
	URL      string // tcp://host:port
	ClientID string
	Group    string
	Submit   func(ctx context.Context, topic string, payload []byte, ack func(error))
	Log      *slog.Logger
	// BeforeAck runs after a message is persisted and before its
	// acknowledgement (crash drills).
	BeforeAck func()
}

// Consumer is one persistent MQTT session in the shared subscription: QoS
// 1, acknowledgements sent by hand only once the message is persisted, so
// a consumer that dies before acknowledging gets the message again from the
// broker (same client id, clean session off).
type Consumer struct {
	c      mqtt.Client
	cancel context.CancelFunc
}

// StartConsumer connects and subscribes; it returns once subscribed.
func StartConsumer(ctx context.Context, cfg ConsumerConfig) (*Consumer, error) {
	ctx, cancel := context.WithCancel(ctx)
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	handler := func(_ mqtt.Client, msg mqtt.Message) {
		cfg.Submit(ctx, msg.Topic(), msg.Payload(), func(err error) {
			if err != nil {
				// Not persisted: no acknowledgement, the broker sends it
				// again after the session reconnects. During a stop that
				// is the design (a stop is not a failure), so it is not
				// warned about.
				if ctx.Err() != nil || errors.Is(err, context.Canceled) {
					log.Debug("alarm: stopping; message left unacknowledged for redelivery", "topic", msg.Topic())
					return
				}
				log.Warn("alarm: message not persisted; left unacknowledged", "topic", msg.Topic(), "err", err)
				return
			}
			if cfg.BeforeAck != nil {
				cfg.BeforeAck()
			}
			msg.Ack()
		})
	}
	filter := SharedFilter(cfg.Group)
	opts := mqtt.NewClientOptions().AddBroker(cfg.URL).SetClientID(cfg.ClientID).
		SetCleanSession(false).SetAutoAckDisabled(true).SetOrderMatters(false).
		SetAutoReconnect(true).SetConnectRetry(true).SetConnectRetryInterval(200 * time.Millisecond).
		SetMaxReconnectInterval(2 * time.Second).SetKeepAlive(10 * time.Second).
		// No resumed subscribes: the connect handler below subscribes on
		// every connect already, and paho, resuming a stored SUBSCRIBE,
		// gives its message id to a token of its own and completes the
		// caller's token with no error and no return codes, which read as
		// granted (seen 3 times in 300 starts against a refusing broker).
		SetResumeSubs(false)
	// The first subscription's answer: StartConsumer returns only once the
	// broker has granted it. paho runs the connect handler on a goroutine of
	// its own, so the connect token completes before the SUBSCRIBE is even
	// sent; a caller told "subscribed" then could publish (or let devices
	// publish) into a shared subscription that has no member yet, and the
	// broker drops such messages. Only a grant or a refusal answers; a
	// subscribe cut short by a lost connection is tried again on reconnect.
	answered := make(chan error, 1)
	var once sync.Once
	opts.SetOnConnectHandler(func(c mqtt.Client) {
		// Subscribe on every connect: a broker that lost its sessions
		// (restarted without persistence) gets the subscription again.
		t := c.Subscribe(filter, 1, handler)
		go func() {
			if !t.WaitTimeout(10*time.Second) || t.Error() != nil {
				log.Warn("alarm: subscribe not answered; tried again on the next connect", "filter", filter, "err", t.Error())
				return
			}
			var err error
			if st, ok := t.(*mqtt.SubscribeToken); ok {
				// One filter, one return code (paho keys it by the
				// filter without its $share/group/ prefix). No code at
				// all is no answer, not a grant.
				if len(st.Result()) == 0 {
					log.Warn("alarm: subscribe completed without the broker's answer; tried again on the next connect", "filter", filter)
					return
				}
				for _, code := range st.Result() {
					if code >= 0x80 {
						err = fmt.Errorf("the broker refused the subscription to %s (return code 0x%02x)", filter, code)
						log.Error("alarm: subscribe refused", "filter", filter, "code", code)
					}
				}
			}
			once.Do(func() { answered <- err })
		}()
	})
	opts.SetDefaultPublishHandler(handler)
	c := mqtt.NewClient(opts)
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	t := c.Connect()
	fail := func(err error) (*Consumer, error) {
		cancel()
		c.Disconnect(0)
		return nil, err
	}
	select {
	case <-t.Done():
	case <-deadline.C:
		return fail(fmt.Errorf("connecting to %s: timed out", cfg.URL))
	}
	if t.Error() != nil {
		return fail(fmt.Errorf("connecting to %s: %w", cfg.URL, t.Error()))
	}
	select {
	case err := <-answered:
		if err != nil {
			return fail(err)
		}
	case <-deadline.C:
		return fail(fmt.Errorf("subscribing to %s at %s: no answer in 15s", filter, cfg.URL))
	}
	return &Consumer{c: c, cancel: cancel}, nil
}

// Stop disconnects (unacknowledged messages stay with the session).
func (c *Consumer) Stop() {
	c.cancel()
	c.c.Disconnect(250)
}

// Publisher publishes telemetry at QoS 1 (the simulator, tests).
type Publisher struct{ c mqtt.Client }

// NewPublisher connects a publishing client.
func NewPublisher(url, clientID string) (*Publisher, error) {
	opts := mqtt.NewClientOptions().AddBroker(url).SetClientID(clientID).SetCleanSession(true).
		SetAutoReconnect(true).SetConnectRetry(true).SetConnectRetryInterval(200 * time.Millisecond).SetMaxReconnectInterval(2 * time.Second).
		SetOrderMatters(false)
	c := mqtt.NewClient(opts)
	t := c.Connect()
	if !t.WaitTimeout(15*time.Second) || t.Error() != nil {
		c.Disconnect(0)
		return nil, fmt.Errorf("publisher connecting to %s: %v", url, t.Error())
	}
	return &Publisher{c: c}, nil
}

// Publish sends one sample and returns the token (wait on it for the
// broker's PUBACK).
func (p *Publisher) Publish(s Sample) mqtt.Token {
	return p.c.Publish(Topic(s.Gateway, s.Device), 1, false, Encode(s))
}

// PublishRaw sends any bytes on any topic (bad-input drills).
func (p *Publisher) PublishRaw(topic string, body []byte) mqtt.Token {
	return p.c.Publish(topic, 1, false, body)
}

// Close disconnects.
func (p *Publisher) Close() { p.c.Disconnect(250) }
