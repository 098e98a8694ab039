package reservation

import (
	"context"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// Option adjusts New.
type Option func(*options)

type options struct {
	clock       func() time.Time
	channel     Channel
	publisher   Publisher
	restoreHook func(ctx context.Context, c Candidate) error
	stageHook   func(ctx context.Context, stage string, q keelsql.Querier) error
	backoff     []time.Duration
	// notifyBackoff is the notifier consumer's redelivery backoff (nil:
	// the events default).
	notifyBackoff []time.Duration
}

func defaultOptions() options {
	return options{backoff: []time.Duration{100 * time.Millisecond, 500 * time.Millisecond}}
}

// WithClock sets the clock every decision reads (release points, holds,
// appeal windows). Tests pass a controllable one; the default is the host's
// clock (Host.Clock, time.Now when unset).
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.clock = now
		}
	}
}

// WithChannel sets how notifications reach users (default: a LogChannel, or
// a WebhookChannel when reservation.webhook_url is set).
func WithChannel(ch Channel) Option { return func(o *options) { o.channel = ch } }

// WithPublisher sets where availability events go (default: the log).
func WithPublisher(p Publisher) Option { return func(o *options) { o.publisher = p } }

// WithRestoreHook is fault injection for tests and drills: hook runs inside
// each release transaction just before a record's capacity is returned, and
// an error from it fails that record exactly as a failed inventory restore
// would (the record is not released, its capacity is not touched, it is
// retried within the run and then handed to compensation). Never set it in
// production.
func WithRestoreHook(hook func(ctx context.Context, c Candidate) error) Option {
	return func(o *options) { o.restoreHook = hook }
}

// WithRetryBackoff sets the pauses before each in-run retry round of the
// records a run failed (default 100ms, 500ms: three attempts in all; a
// round retries every failed record, so a run pauses at most their sum).
func WithRetryBackoff(pauses ...time.Duration) Option {
	return func(o *options) { o.backoff = append([]time.Duration(nil), pauses...) }
}

// WithNotifyBackoff sets the pauses before each redelivery of a
// notification whose send failed (the notifier consumer's backoff; default
// keelevents.DefaultBackoff, the last pause repeating).
func WithNotifyBackoff(pauses ...time.Duration) Option {
	return func(o *options) { o.notifyBackoff = append([]time.Duration(nil), pauses...) }
}

// withStageHook runs hook inside release transactions at named stages
// ("claimed", "restored"); the chaos test drops the connection there.
func withStageHook(hook func(ctx context.Context, stage string, q keelsql.Querier) error) Option {
	return func(o *options) { o.stageHook = hook }
}
