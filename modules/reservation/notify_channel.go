package reservation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"
)

// ErrRejected marks a delivery the counterpart refused for good (retrying
// cannot help): the notification is marked failed at once.
var ErrRejected = errors.New("notification rejected")

// Message is one notification to a user.
type Message struct {
	// ID is the notification's row; Key is the idempotency key a counterpart can
	// use to drop a repeat (a delivery retried after a lost response).
	ID            int64           `json:"id"`
	Key           string          `json:"key"`
	Kind          string          `json:"kind"`
	UserID        string          `json:"user_id"`
	ReservationID int64           `json:"reservation_id"`
	TextZH        string          `json:"text_zh"`
	TextEN        string          `json:"text_en"`
	Data          json.RawMessage `json:"data"`
}

// Channel delivers notifications (a template message, an SMS gateway, a
// webhook). Send must be idempotent on Message.Key: the notifier may send
// a notice again when its commit after a send was lost. An error redelivers
// the notice with the notifier's backoff unless it wraps ErrRejected.
type Channel interface {
	Name() string
	Send(ctx context.Context, msg Message) error
}

// LogChannel writes notifications to a logger: the default, and what
// `keel dev` shows.
type LogChannel struct{ Logger *slog.Logger }

// Name implements Channel.
func (c LogChannel) Name() string { return "log" }

// Send implements Channel.
func (c LogChannel) Send(ctx context.Context, msg Message) error {
	c.Logger.InfoContext(ctx, "reservation: notification", "key", msg.Key, "kind", msg.Kind, "user", msg.UserID,
		"reservation", msg.ReservationID, "text", msg.TextZH)
	return nil
}

// WebhookChannel POSTs each notification as JSON with an Idempotency-Key
// header. 2xx is delivered; 4xx other than 408 and 429 is a rejection;
// anything else retries.
type WebhookChannel struct {
	URL    string
	Client *http.Client
}

// NewWebhookChannel returns a webhook channel with a 10-second timeout.
func NewWebhookChannel(url string) *WebhookChannel {
	return &WebhookChannel{URL: url, Client: &http.Client{Timeout: 10 * time.Second}}
}

// Name implements Channel.
func (c *WebhookChannel) Name() string { return "webhook" }

// Send implements Channel.
func (c *WebhookChannel) Send(ctx context.Context, msg Message) error {
	body, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("%w: encoding: %v", ErrRejected, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrRejected, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", msg.Key)
	resp, err := c.Client.Do(req)
	if err != nil {
		return fmt.Errorf("posting notification %d: %w", msg.ID, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != 408 && resp.StatusCode != 429:
		return fmt.Errorf("%w: webhook answered %s", ErrRejected, resp.Status)
	}
	return fmt.Errorf("webhook answered %s", resp.Status)
}

func (m *Module[TTx]) defaultChannel() Channel {
	if m.set.webhookURL != "" {
		return NewWebhookChannel(m.set.webhookURL)
	}
	return LogChannel{Logger: m.log}
}

// Event says the capacity of some slots changed, for caches and pages.
type Event struct {
	// ID is the event's id in the events outbox ("rsv-availability:<n>").
	ID    string             `json:"id"`
	Slots []SlotAvailability `json:"slots"`
	At    time.Time          `json:"at"`
}

// Publisher receives availability events from the module's consumer of
// AvailabilityTopic ("reservation-availability"), inside its inbox
// transaction: at least once, in order per slot, a redelivery absorbed by
// the inbox. Keep it quick; an error redelivers the event.
type Publisher interface {
	Publish(ctx context.Context, events []Event) error
}

type logPublisher struct{ log *slog.Logger }

func (p logPublisher) Publish(ctx context.Context, events []Event) error {
	for _, e := range events {
		p.log.DebugContext(ctx, "reservation: availability", "event", e.ID, "slots", len(e.Slots))
	}
	return nil
}
