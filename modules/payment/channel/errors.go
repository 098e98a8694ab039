package channel

import (
	"errors"
	"fmt"
	"net"
	"net/http"
)

// ErrNotSent is wrapped together with ErrUnknownOutcome when the request
// provably never left this host (the connection could not be opened). A
// caller may treat it like any unknown outcome (query first); it is only
// the extra certainty that retrying with the same number is harmless.
var ErrNotSent = errors.New("channel: request was not sent")

// maxResponse bounds a channel's answer (bills included) held in memory.
const maxResponse = 64 << 20

// maxNotification bounds a callback body; both channels send a few KiB.
const maxNotification = 64 << 10

// transportError classifies a failed round trip: once bytes may have left,
// the channel may have acted, so the outcome is unknown.
func transportError(op string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return fmt.Errorf("%s: %w: %w: %v", op, ErrUnknownOutcome, ErrNotSent, err)
	}
	return fmt.Errorf("%s: %w: %v", op, ErrUnknownOutcome, err)
}

// statusError classifies an HTTP status the channel answered with when no
// business code says more: 5xx and 429 leave the outcome unknown, 404 is
// "no such thing", any other 4xx is a permanent refusal.
func statusError(op string, status int, detail string) error {
	switch {
	case status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout:
		return fmt.Errorf("%s: %w: HTTP %d %s", op, ErrUnknownOutcome, status, detail)
	case status == http.StatusNotFound:
		return fmt.Errorf("%s: %w: HTTP %d %s", op, ErrNotFound, status, detail)
	default:
		return fmt.Errorf("%s: %w: HTTP %d %s", op, ErrRejected, status, detail)
	}
}

func newHTTPClient(cfg Config) *http.Client {
	return &http.Client{
		Timeout: cfg.HTTPTimeout,
		// A channel never redirects an API call; following one would send the
		// signed request somewhere it was not signed for.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
