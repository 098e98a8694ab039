// Package sim runs the inventory's outside world over loopback: an order
// service that answers what became of an order line, and a warehouse that
// answers what it did with a reservation and lists its shipment receipts.
// Both are real HTTP servers; `keel dev` and the tests drive them, and
// either can be told to fail (500) or hang, which the module must read as
// "unknown", never as "no".
package sim

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Mode is how a simulator answers.
type Mode int

// The modes.
const (
	Normal Mode = iota
	Fail        // 500 on every query
	Hang        // answers after the caller's timeout
)

// server is the common part: a listener and its mode.
type server struct {
	srv  *http.Server
	ln   net.Listener
	mu   sync.Mutex
	mode Mode
	hang time.Duration
}

func (s *server) start(h http.Handler) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.ln, s.hang = ln, 10*time.Second
	s.srv = &http.Server{Handler: s.wrap(h), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return nil
}

func (s *server) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		mode, hang := s.mode, s.hang
		s.mu.Unlock()
		switch mode {
		case Fail:
			http.Error(w, "simulated failure", http.StatusInternalServerError)
			return
		case Hang:
			select {
			case <-time.After(hang):
			case <-r.Context().Done():
			}
			return
		}
		h.ServeHTTP(w, r)
	})
}

// URL is the simulator's base URL.
func (s *server) URL() string { return "http://" + s.ln.Addr().String() }

// SetMode changes how it answers.
func (s *server) SetMode(m Mode) {
	s.mu.Lock()
	s.mode = m
	s.mu.Unlock()
}

// Close stops it.
func (s *server) Close(ctx context.Context) error {
	if s.srv == nil {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return s.srv.Close()
	}
	return err
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// OrderService knows each order line's status.
type OrderService struct {
	server
	lines map[string]string
	// OnQuery, if set, runs before each answer (a test's way to make the
	// world move while the module is asking).
	OnQuery func(line string)
}

// NewOrderService starts one on a loopback port.
func NewOrderService() (*OrderService, error) {
	o := &OrderService{lines: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /order-lines/{line}", func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		hook := o.OnQuery
		o.mu.Unlock()
		if hook != nil {
			hook(r.PathValue("line"))
		}
		o.mu.Lock()
		st, ok := o.lines[r.PathValue("line")]
		o.mu.Unlock()
		if !ok {
			http.Error(w, `{"error":"unknown order line"}`, http.StatusNotFound)
			return
		}
		writeJSON(w, map[string]string{"line": r.PathValue("line"), "status": st})
	})
	return o, o.start(mux)
}

// SetHook sets OnQuery.
func (o *OrderService) SetHook(f func(line string)) {
	o.mu.Lock()
	o.OnQuery = f
	o.mu.Unlock()
}

// Set records an order line's status (pending, paid, shipped, cancelled).
func (o *OrderService) Set(line, status string) {
	o.mu.Lock()
	o.lines[line] = status
	o.mu.Unlock()
}

// Receipt is a warehouse shipment receipt.
type Receipt struct {
	ReservationID int64     `json:"reservation_id"`
	Receipt       string    `json:"receipt"`
	Warehouse     string    `json:"warehouse"`
	SKU           string    `json:"sku"`
	Qty           int64     `json:"qty"`
	ShippedAt     time.Time `json:"shipped_at"`
}

// Warehouse knows what it did with each reservation.
type Warehouse struct {
	server
	status   map[int64]string
	receipts map[int64]Receipt
}

// NewWarehouse starts one on a loopback port.
func NewWarehouse() (*Warehouse, error) {
	wh := &Warehouse{status: map[int64]string{}, receipts: map[int64]Receipt{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /reservations/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			http.Error(w, `{"error":"bad id"}`, http.StatusBadRequest)
			return
		}
		wh.mu.Lock()
		st, ok := wh.status[id]
		wh.mu.Unlock()
		if !ok {
			st = "none"
		}
		writeJSON(w, map[string]any{"reservation_id": id, "status": st})
	})
	mux.HandleFunc("GET /receipts", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, wh.Receipts())
	})
	return wh, wh.start(mux)
}

// Set records what the warehouse did with a reservation (none, picking, shipped).
func (wh *Warehouse) Set(id int64, status string) {
	wh.mu.Lock()
	wh.status[id] = status
	wh.mu.Unlock()
}

// Ship records a shipment and its receipt.
func (wh *Warehouse) Ship(r Receipt) {
	wh.mu.Lock()
	wh.status[r.ReservationID] = "shipped"
	wh.receipts[r.ReservationID] = r
	wh.mu.Unlock()
}

// Receipts lists the shipment receipts by reservation.
func (wh *Warehouse) Receipts() []Receipt {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	out := make([]Receipt, 0, len(wh.receipts))
	for _, r := range wh.receipts {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ReservationID < out[j].ReservationID })
	return out
}
