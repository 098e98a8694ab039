package carrierapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/keelwork/keel/modules/tracking/domain"
)

// ShareHeader tells the carrier's side (and the simulators' meters) which
// share of our quota a query spends.
const ShareHeader = "X-Quota-Share"

// Class is how a failed query must be treated.
type Class string

// Failure classes.
const (
	// Retry: network trouble, a timeout or a 5xx; retry with backoff and
	// count it toward the share's breaker.
	Retry Class = "retry"
	// RateLimited: a 429; wait at least RetryAfter, never counted as the
	// carrier failing.
	RateLimited Class = "rate_limited"
	// Permanent: authentication or parameters refused (401, 403, 400, 404,
	// 422) or an unreadable answer; retrying cannot help, an operator must.
	Permanent Class = "permanent"
)

// Error is a failed query.
type Error struct {
	Class      Class
	Status     int
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("carrier answered %d (%s): %v", e.Status, e.Class, e.Err)
	}
	return fmt.Sprintf("carrier query failed (%s): %v", e.Class, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Client queries one carrier's pull API.
type Client struct {
	Carrier *domain.Carrier
	HTTP    *http.Client
}

// NewClient is a client with the carrier's timeout.
func NewClient(c *domain.Carrier) *Client {
	return &Client{Carrier: c, HTTP: &http.Client{Timeout: time.Duration(c.Timeout)}}
}

// Events asks for a waybill's events (seq > 0: that event only), spending
// share ("realtime" or "backfill").
func (c *Client) Events(ctx context.Context, share, waybill string, seq int64) ([]domain.RawEvent, error) {
	if c.Carrier.PullURL == "" {
		return nil, &Error{Class: Permanent, Err: errors.New("the carrier has no pull API configured")}
	}
	q := url.Values{"waybill": {waybill}}
	if seq > 0 {
		q.Set("seq", strconv.FormatInt(seq, 10))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Carrier.PullURL+"/v1/events?"+q.Encode(), nil)
	if err != nil {
		return nil, &Error{Class: Permanent, Err: err}
	}
	req.Header.Set("X-Api-Key", c.Carrier.APIKey)
	req.Header.Set(ShareHeader, share)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, &Error{Class: Retry, Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, &Error{Class: Retry, Status: resp.StatusCode, Err: err}
	}
	if e := classify(resp, body); e != nil {
		return nil, e
	}
	evs, err := DecodeBatch(body, true)
	if err != nil {
		return nil, &Error{Class: Permanent, Status: resp.StatusCode, Err: err}
	}
	return evs, nil
}

// Classify maps a status to a failure class (nil for 2xx).
func classify(resp *http.Response, body []byte) *Error {
	st := resp.StatusCode
	msg := errors.New(http.StatusText(st))
	if len(body) > 0 && len(body) < 300 {
		msg = errors.New(string(body))
	}
	switch {
	case st >= 200 && st < 300:
		return nil
	case st == http.StatusTooManyRequests:
		return &Error{Class: RateLimited, Status: st, RetryAfter: RetryAfter(resp.Header.Get("Retry-After"), time.Now()), Err: msg}
	case st >= 500 || st == http.StatusRequestTimeout:
		return &Error{Class: Retry, Status: st, Err: msg}
	}
	return &Error{Class: Permanent, Status: st, Err: msg}
}

// DefaultRetryAfter is waited when a 429 names no (readable) Retry-After.
const DefaultRetryAfter = time.Second

// RetryAfter reads a Retry-After header (seconds or an HTTP date), at
// least DefaultRetryAfter when absent or unreadable, at most an hour.
func RetryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return DefaultRetryAfter
	}
	if s, err := strconv.Atoi(h); err == nil && s >= 0 {
		return min(time.Duration(s)*time.Second, time.Hour)
	}
	if t, err := http.ParseTime(h); err == nil {
		return min(max(t.Sub(now), 0), time.Hour)
	}
	return DefaultRetryAfter
}
