// Package sim simulates carriers for tests and `keel dev`: each Carrier is
// a real HTTP server over loopback serving the carrier's pull API (with its
// API key and its quota enforced: 429 with Retry-After past it), pushing
// signed webhooks (with duplicates, reordering, gaps and events without
// ids, as real carriers do), metering every query per share, and going
// down on demand (connections dropped).
package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/keelwork/keel/modules/tracking/carrierapi"
	"github.com/keelwork/keel/modules/tracking/domain"
)

// Event is one event of a simulated parcel.
type Event struct {
	EventID    string `json:"event_id,omitempty"`
	Waybill    string `json:"waybill"`
	Seq        int64  `json:"seq,omitempty"`
	Code       string `json:"code"`
	OccurredAt string `json:"occurred_at"`
	Location   string `json:"location,omitempty"`
	Detail     string `json:"detail,omitempty"`
	PushedAt   string `json:"pushed_at,omitempty"`
}

// Carrier is one simulated carrier.
type Carrier struct {
	Config *domain.Carrier
	// Quota is what the pull API allows per second (default the
	// configuration's Quota).
	Quota float64
	// ShareQuota, when set, is what the carrier granted each share (by
	// the share header) per second: the carrier's meter then holds every
	// share's limit too, answering 429 past it, as it holds the quota.
	ShareQuota map[string]float64

	mu       sync.Mutex
	parcels  map[string][]Event
	accepted []time.Time            // query arrival times inside the quota
	byShare  map[string][]time.Time // per share header
	refused  int                    // 429s answered
	force429 int                    // answer the next n queries 429
	down     bool

	srv *http.Server
	ln  net.Listener
	url string
}

// New builds a simulator for c (not yet listening).
func New(c *domain.Carrier) *Carrier {
	return &Carrier{Config: c, Quota: c.Quota, parcels: map[string][]Event{}, byShare: map[string][]time.Time{}}
}

// Start listens on a loopback port and serves until Close.
func (s *Carrier) Start() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("simulator %s: %w", s.Config.Code, err)
	}
	s.ln = ln
	s.url = "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/events", s.events)
	s.srv = &http.Server{Handler: s.gate(mux), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return nil
}

// URL is the pull API's base URL.
func (s *Carrier) URL() string { return s.url }

// Close stops the server.
func (s *Carrier) Close() error {
	if s.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// SetDown makes the carrier unreachable (every connection is dropped
// without an answer) or brings it back.
func (s *Carrier) SetDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

// Force429 answers the next n queries with 429 and Retry-After: 1.
func (s *Carrier) Force429(n int) {
	s.mu.Lock()
	s.force429 = n
	s.mu.Unlock()
}

func (s *Carrier) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		down := s.down
		s.mu.Unlock()
		if down {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// admit meters a query against the quota and its share's limit: sliding
// one-second windows of the queries accepted.
func (s *Carrier) admit(share string, now time.Time) (bool, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.force429 > 0 {
		s.force429--
		s.refused++
		return false, time.Second
	}
	cut := now.Add(-time.Second)
	if ok, wait := within(s.accepted, s.Quota, cut); !ok {
		s.refused++
		return false, wait
	}
	if q, ok := s.ShareQuota[share]; ok {
		if ok, wait := within(s.byShare[share], q, cut); !ok {
			s.refused++
			return false, wait
		}
	}
	s.accepted = append(s.accepted, now)
	s.byShare[share] = append(s.byShare[share], now)
	return true, 0
}

// within reports whether one more arrival after cut keeps ts under limit,
// and else how long until the oldest one in the window leaves it.
func within(ts []time.Time, limit float64, cut time.Time) (bool, time.Duration) {
	i := sort.Search(len(ts), func(i int) bool { return ts[i].After(cut) })
	if float64(len(ts)-i) >= limit {
		return false, ts[i].Sub(cut)
	}
	return true, 0
}

func (s *Carrier) events(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Api-Key") != s.Config.APIKey {
		http.Error(w, "bad api key", http.StatusUnauthorized)
		return
	}
	ok, wait := s.admit(r.Header.Get(carrierapi.ShareHeader), time.Now())
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int((wait+time.Second-1)/time.Second))))
		http.Error(w, "quota exceeded", http.StatusTooManyRequests)
		return
	}
	waybill := r.URL.Query().Get("waybill")
	if !domain.ValidWaybill(waybill) {
		http.Error(w, "bad waybill", http.StatusBadRequest)
		return
	}
	seq, _ := strconv.ParseInt(r.URL.Query().Get("seq"), 10, 64)
	s.mu.Lock()
	evs, known := s.parcels[waybill]
	var out []Event
	for _, e := range evs {
		if seq == 0 || e.Seq == seq {
			out = append(out, e)
		}
	}
	s.mu.Unlock()
	if !known {
		http.Error(w, "no such waybill", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"events": nonNil(out)})
}

func nonNil(evs []Event) []Event {
	if evs == nil {
		return []Event{}
	}
	return evs
}

// AddParcel gives the carrier a parcel's events (what its pull API
// answers).
func (s *Carrier) AddParcel(evs ...Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range evs {
		s.parcels[e.Waybill] = append(s.parcels[e.Waybill], e)
	}
}

// Stats is what the simulator measured.
type Stats struct {
	Accepted int
	Refused  int
	// MaxWindow is the most queries accepted in any one-second window;
	// MaxWindowShare the same per share.
	MaxWindow      int
	MaxWindowShare map[string]int
	PerShare       map[string]int
	First, Last    time.Time
}

// Stats measures the queries served so far.
func (s *Carrier) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Accepted: len(s.accepted), Refused: s.refused, MaxWindow: maxWindow(s.accepted),
		MaxWindowShare: map[string]int{}, PerShare: map[string]int{}}
	if len(s.accepted) > 0 {
		st.First, st.Last = s.accepted[0], s.accepted[len(s.accepted)-1]
	}
	for k, v := range s.byShare {
		st.MaxWindowShare[k] = maxWindow(v)
		st.PerShare[k] = len(v)
	}
	return st
}

// ShareTimes returns the arrival times of one share's queries.
func (s *Carrier) ShareTimes(share string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.byShare[share])
}

// maxWindow is the most times within any half-open one-second window.
func maxWindow(ts []time.Time) int {
	best, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= time.Second {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

// Push posts events as one signed webhook batch to url, signed with the
// carrier's secret number secretIdx at ts; it returns the HTTP status.
func (s *Carrier) Push(ctx context.Context, url string, secretIdx int, ts time.Time, evs ...Event) (int, error) {
	body, err := json.Marshal(map[string]any{"events": evs})
	if err != nil {
		return 0, err
	}
	return PushRaw(ctx, url, s.Config, s.Config.Secrets[secretIdx], ts, body)
}

// PushRaw posts body signed with secret (tests sign bodies of their own).
func PushRaw(ctx context.Context, url string, c *domain.Carrier, secret string, ts time.Time, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		carrierapi.SignRequest(req.Header, c, secret, ts, body)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// ErrDown is returned by Push while the carrier's own side is down.
var ErrDown = errors.New("simulated carrier is down")
