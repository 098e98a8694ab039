// Package web is the tracking module's HTTP surface: the carriers' webhook
// receiver (a handler of its own, since carriers authenticate by signature,
// not by the console's tokens), the admin API and the console pages.
package web

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/keelwork/keel/modules/tracking/carrierapi"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/ingest"
)

// WebhookPrefix is where carriers push: POST /hooks/tracking/{carrier}.
const WebhookPrefix = "/hooks/tracking/"

// Receiver verifies and ingests pushes. Everything it refuses (unknown
// carrier, oversized or malformed body, missing or bad signature, stale
// timestamp) is answered with the carrier's expected status and writes
// nothing but the security counter.
type Receiver[TTx any] struct {
	Svc *ingest.Service[TTx]
	Now func() time.Time
	Log *slog.Logger
}

// Handler is the receiver's mux.
func (rc *Receiver[TTx]) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+WebhookPrefix+"{carrier}", rc.push)
	return mux
}

func (rc *Receiver[TTx]) refuse(ctx context.Context, w http.ResponseWriter, carrier, reason string, status int, detail string) {
	if err := rc.Svc.Store.CountSecurity(ctx, carrier, reason, rc.Now().UTC().Truncate(time.Microsecond)); err != nil && rc.Log != nil {
		rc.Log.Warn("counting a refused push", "carrier", carrier, "reason", reason, "err", err)
	}
	rc.Svc.M.Security.WithLabelValues(carrier, reason).Inc()
	writeProblem(w, status, reason, detail)
}

func (rc *Receiver[TTx]) push(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	code := r.PathValue("carrier")
	c, ok := rc.Svc.Carriers[code]
	if !ok {
		rc.refuse(ctx, w, "", "unknown_carrier", http.StatusNotFound, "no carrier is configured under this path")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, carrierapi.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			rc.refuse(ctx, w, code, "oversized", http.StatusRequestEntityTooLarge, "a push is limited to 256 KiB")
			return
		}
		rc.refuse(ctx, w, code, "unreadable", http.StatusBadRequest, "the body could not be read")
		return
	}
	if _, err := carrierapi.Verify(c, r.Header, body, rc.Now()); err != nil {
		reason := err.Error()
		for _, e := range []error{carrierapi.ErrNoSignature, carrierapi.ErrBadSignature, carrierapi.ErrNoTimestamp, carrierapi.ErrStale} {
			if errors.Is(err, e) {
				reason = e.Error()
			}
		}
		rc.refuse(ctx, w, code, reason, c.RejectStatus, "the push's signature was not accepted")
		return
	}
	evs, err := carrierapi.DecodeBatch(body, false)
	if err != nil {
		rc.refuse(ctx, w, code, "malformed", http.StatusBadRequest, err.Error())
		return
	}
	res, err := rc.Svc.Ingest(ctx, code, ingest.ViaWebhook, evs)
	if err != nil {
		// A push cut off by a stop (its request's context cancelled) is
		// the carrier's to send again, not an error of anyone's.
		if rc.Log != nil && (ctx.Err() != nil || errors.Is(err, context.Canceled)) {
			rc.Log.Info("stopping; the carrier will push again", "carrier", code)
		} else if rc.Log != nil {
			rc.Log.Error("ingesting a push", "carrier", code, "err", err)
		}
		// 503: the carrier retries the same push later, which is safe.
		writeProblem(w, http.StatusServiceUnavailable, "unavailable", "the push could not be stored; retry it")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"results": res})
}

func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status,
		"code": code, "detail": detail})
}

// carrierName is a carrier's name in the view's language.
func carrierName(c *domain.Carrier, lang string) string {
	if c == nil {
		return ""
	}
	return c.Name(lang)
}
