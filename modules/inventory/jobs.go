package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/modules/inventory/domain"
	"github.com/keelwork/keel/modules/inventory/store"
)

// SweepReport counts what one timeout sweep did.
type SweepReport struct {
	Checked  int `json:"checked"`
	Released int `json:"released"`
	Kept     int `json:"kept"`
	Delayed  int `json:"delayed"`
	Manual   int `json:"manual"`
	Skipped  int `json:"skipped"` // moved by someone else meanwhile
}

// SweepTimeouts checks the reservations past their time: never on age
// alone, it asks the order service and the warehouse, releases only if
// both say the stock is not needed and the reservation is still 已预占 at
// the version it was checked at, keeps what goes on, and delays an unknown
// answer (after MaxChecks of them, a conflict ticket for a person).
func (m *Module[TTx]) SweepTimeouts(ctx context.Context, limit int) (SweepReport, error) {
	var rep SweepReport
	type due struct{ id, version int64 }
	rows, err := m.db.Query(ctx, m.st.SQL("ReservationDue"), m.now(), limit)
	list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (due, error) {
		var d due
		return d, r.Scan(&d.id, &d.version)
	})
	if err != nil {
		return rep, fmt.Errorf("listing due reservations: %w", err)
	}
	for _, d := range list {
		r, err := m.st.GetReservation(ctx, m.db, d.id)
		if err != nil {
			return rep, err
		}
		if r.State != domain.Reserved || r.Version != d.version {
			rep.Skipped++
			continue
		}
		rep.Checked++
		order := m.askOrder(ctx, r.OrderLine)
		ship := m.askWarehouse(ctx, r.ID)
		detail := fmt.Sprintf("timeout check: order %q, warehouse %q", order, ship)
		switch domain.Timeout(order, ship) {
		case domain.TimeoutRelease:
			res, err := m.act(ctx, actionKey("release", r.ID), "", func(tx keelsql.Tx[TTx]) (Result, error) {
				return m.move(ctx, tx, r.ID, domain.ActRelease, r.Version, detail, map[string]any{"order": order, "warehouse": ship})
			})
			switch {
			case errors.Is(err, ErrConcurrent):
				rep.Skipped++
			case err != nil:
				return rep, err
			case res.Outcome == OutcomeApplied && !res.Replayed:
				rep.Released++
			default:
				rep.Skipped++
			}
		case domain.TimeoutKeep:
			if err := m.recheck(ctx, r, m.set.RecheckAfter); err != nil {
				return rep, err
			}
			rep.Kept++
		default:
			manual := r.Checks+1 >= m.set.MaxChecks
			if err := m.delayUnknown(ctx, r, detail, manual); err != nil {
				return rep, err
			}
			if manual {
				rep.Manual++
			} else {
				rep.Delayed++
			}
		}
	}
	return rep, nil
}

// recheck moves the next check of r (at its version) later.
func (m *Module[TTx]) recheck(ctx context.Context, r store.Reservation, after time.Duration) error {
	_, err := m.st.Exec(ctx, m.db, "ReservationRecheck", r.ID, r.Version, m.now().Add(after), m.now())
	return err
}

// delayUnknown delays an unknown answer; past the budget it opens a
// ticket for a person and stops the automatic checks.
func (m *Module[TTx]) delayUnknown(ctx context.Context, r store.Reservation, detail string, manual bool) error {
	return m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		after := m.set.RecheckAfter
		if manual {
			after = 365 * 24 * time.Hour
			ev, _ := json.Marshal(map[string]any{"reservation": r, "detail": detail, "checks": r.Checks + 1})
			c := store.Conflict{Intent: "timeout:" + strconv.FormatInt(r.ID, 10), ReservationID: r.ID, Warehouse: r.Warehouse,
				SKU: r.SKU, Kind: "timeout_unknown", Evidence: string(ev), OpenedAt: m.now()}
			if err := m.st.OpenConflict(ctx, tx, &c); err != nil {
				return err
			}
		}
		_, err := m.st.Exec(ctx, tx, "ReservationDelay", r.ID, r.Version, m.now().Add(after), m.now())
		return err
	})
}

// askOrder asks the order service about a line; any failure is unknown.
func (m *Module[TTx]) askOrder(ctx context.Context, line string) domain.OrderStatus {
	var body struct {
		Status string `json:"status"`
	}
	if m.orderURL() == "" || get(ctx, m.order, m.orderURL()+"/order-lines/"+url.PathEscape(line), &body) != nil {
		return domain.OrderUnknown
	}
	switch s := domain.OrderStatus(body.Status); s {
	case domain.OrderPending, domain.OrderPaid, domain.OrderShipped, domain.OrderCancelled:
		return s
	}
	return domain.OrderUnknown
}

// askWarehouse asks the warehouse about a reservation; any failure is unknown.
func (m *Module[TTx]) askWarehouse(ctx context.Context, id int64) domain.ShipStatus {
	var body struct {
		Status string `json:"status"`
	}
	if m.warehouseURL() == "" || get(ctx, m.warehouse, m.warehouseURL()+"/reservations/"+strconv.FormatInt(id, 10), &body) != nil {
		return domain.ShipUnknown
	}
	switch s := domain.ShipStatus(body.Status); s {
	case domain.ShipNone, domain.ShipPicking, domain.ShipShipped:
		return s
	}
	return domain.ShipUnknown
}

func get(ctx context.Context, c *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(v)
}

func (m *Module[TTx]) orderURL() string {
	m.urlMu.RLock()
	defer m.urlMu.RUnlock()
	return m.urls[0]
}

func (m *Module[TTx]) warehouseURL() string {
	m.urlMu.RLock()
	defer m.urlMu.RUnlock()
	return m.urls[1]
}

// SetOutside points the module at the order service and the warehouse
// (`keel dev` points it at its simulators).
func (m *Module[TTx]) SetOutside(orderURL, warehouseURL string) {
	m.urlMu.Lock()
	m.urls = [2]string{orderURL, warehouseURL}
	m.urlMu.Unlock()
}

// sweepLoop runs the timeout sweep every interval until ctx ends.
func (m *Module[TTx]) sweepLoop(every time.Duration) func(ctx context.Context) {
	return func(ctx context.Context) {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := m.SweepTimeouts(ctx, 200); err != nil && ctx.Err() == nil {
					m.Log.Warn("inventory: timeout sweep", "err", err)
				}
			}
		}
	}
}
