package carrierapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/keelwork/keel/modules/tracking/domain"
)

// TestPullClassification: every kind of refusal a carrier's query API
// answers, from a real HTTP server, is classified as the issue asks:
// authentication and parameters → permanent (manual), 429 → rate limited
// with its Retry-After (seconds or date), 5xx, 408 and network trouble →
// retry.
func TestPullClassification(t *testing.T) {
	date := time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)
	cases := []struct {
		status     int
		retryAfter string
		class      Class
		wait       time.Duration // RetryAfter at least (429 only)
	}{
		{http.StatusBadRequest, "", Permanent, 0},
		{http.StatusUnauthorized, "", Permanent, 0},
		{http.StatusForbidden, "", Permanent, 0},
		{http.StatusNotFound, "", Permanent, 0},
		{http.StatusUnprocessableEntity, "", Permanent, 0},
		{http.StatusTooManyRequests, "7", RateLimited, 7 * time.Second},
		{http.StatusTooManyRequests, date, RateLimited, time.Second},
		{http.StatusTooManyRequests, "", RateLimited, DefaultRetryAfter},
		{http.StatusRequestTimeout, "", Retry, 0},
		{http.StatusInternalServerError, "", Retry, 0},
		{http.StatusBadGateway, "", Retry, 0},
		{http.StatusServiceUnavailable, "", Retry, 0},
	}
	for _, c := range cases {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c.retryAfter != "" {
				w.Header().Set("Retry-After", c.retryAfter)
			}
			w.WriteHeader(c.status)
		}))
		cl := NewClient(&domain.Carrier{Code: "x", PullURL: srv.URL, APIKey: "k", Timeout: domain.Duration(5 * time.Second)})
		_, err := cl.Events(context.Background(), "realtime", "WB1", 0)
		srv.Close()
		var ce *Error
		if !errors.As(err, &ce) || ce.Class != c.class || ce.Status != c.status {
			t.Fatalf("%d (Retry-After %q): %v; want class %s", c.status, c.retryAfter, err, c.class)
		}
		if c.class == RateLimited && (ce.RetryAfter < c.wait || ce.RetryAfter > time.Hour) {
			t.Fatalf("429 with Retry-After %q: waits %s; want at least %s", c.retryAfter, ce.RetryAfter, c.wait)
		}
	}
	// Nothing listening: network trouble, retried.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cl := NewClient(&domain.Carrier{Code: "x", PullURL: "http://" + addr, APIKey: "k", Timeout: domain.Duration(5 * time.Second)})
	_, err = cl.Events(context.Background(), "realtime", "WB1", 0)
	var ce *Error
	if !errors.As(err, &ce) || ce.Class != Retry {
		t.Fatalf("refused connection: %v; want class %s", err, Retry)
	}
}
