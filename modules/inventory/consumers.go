package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/modules/inventory/domain"
	"github.com/keelwork/keel/modules/inventory/store"
)

// The consumers' durable names.
const (
	ConsumerFulfilment = "inventory-fulfilment"
	ConsumerSearch     = "inventory-search"
	ConsumerStats      = "inventory-stats"
)

// errPaused holds back a low-value consumer while the inventory is over
// its watermark: the event is redelivered later, nothing is lost.
var errPaused = errors.New("paused: the inventory is over its watermark")

// maxGap bounds how many missing versions one event refetches.
const maxGap = 1000

// registerConsumers subscribes the three consumers, each through the
// inbox. The search projection and statistics are routed by the
// (warehouse, SKU) key so a pair's movements arrive in order, and pause
// over the watermark. Fulfilment is never paused and is not ordered: a
// pick task depends on its confirmation alone (one per reservation, by its
// unique id), so it takes deliveries in batches across pairs, where an
// ordered consumer gets one pair's head at a time.
func (m *Module[TTx]) registerConsumers() error {
	lowValue := []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}
	for _, c := range []keelevents.Consumer[TTx]{
		{Name: ConsumerFulfilment, Topics: []string{Topic}, Batch: fulfilmentBatch, HandleBatch: m.handleFulfilment},
		{Name: ConsumerSearch, Topics: []string{Topic}, Ordered: true, MaxAttempts: 1000, Backoff: lowValue,
			Handle: m.paused(m.handleSearch)},
		{Name: ConsumerStats, Topics: []string{Topic}, Ordered: true, MaxAttempts: 1000, Backoff: lowValue,
			Handle: m.paused(m.handleStats)},
	} {
		if err := m.ev.Consume(c); err != nil {
			return err
		}
	}
	return nil
}

type handler[TTx any] func(ctx context.Context, tx keelsql.Tx[TTx], d *keelevents.Delivery) error

func (m *Module[TTx]) paused(h handler[TTx]) handler[TTx] {
	return func(ctx context.Context, tx keelsql.Tx[TTx], d *keelevents.Delivery) error {
		if m.adm.over() {
			m.pausedDeliveries.Add(1)
			return errPaused
		}
		return h(ctx, tx, d)
	}
}

func decodeEvent(d *keelevents.Delivery) (StockEvent, error) {
	var ev StockEvent
	if err := json.Unmarshal(d.Payload, &ev); err != nil {
		return ev, fmt.Errorf("decoding %s/%s: %w", d.Topic, d.ID, err)
	}
	return ev, nil
}

// fulfilmentBatch bounds the deliveries fulfilment applies in one
// transaction: a backlog (the seed's 2,400,000 events) drains at a commit
// per batch, not per event.
const fulfilmentBatch = 500

// handleFulfilment creates one pick task per confirmed reservation, a
// batch of deliveries in one statement: the task's unique reservation id
// absorbs what the inbox has not.
func (m *Module[TTx]) handleFulfilment(ctx context.Context, tx keelsql.Tx[TTx], ds []*keelevents.Delivery) error {
	var ps []store.Pick
	for _, d := range ds {
		ev, err := decodeEvent(d)
		if err != nil {
			return err
		}
		if ev.Movement == domain.MoveConfirm {
			ps = append(ps, store.Pick{Reservation: ev.ReservationID, Ledger: ev.LedgerID, Warehouse: ev.Warehouse, SKU: ev.SKU, Qty: ev.Qty})
		}
	}
	return m.st.InsertPicks(ctx, tx, ps, m.now())
}

// handleSearch is the search projection: version-conditional (it never
// goes back; an older version is recorded as stale), and a version it
// skipped is marked and refetched from the ledger.
func (m *Module[TTx]) handleSearch(ctx context.Context, tx keelsql.Tx[TTx], d *keelevents.Delivery) error {
	ev, err := decodeEvent(d)
	if err != nil {
		return err
	}
	return m.applySearch(ctx, tx, ev)
}

func (m *Module[TTx]) applySearch(ctx context.Context, tx keelsql.Tx[TTx], ev StockEvent) error {
	now := m.now()
	var cur, av, oh int64
	err := tx.QueryRow(ctx, m.st.SQL("SearchGet"), ev.Warehouse, ev.SKU).Scan(&cur, &av, &oh)
	if err != nil && !errors.Is(err, store.ErrNoRows) {
		return err
	}
	if ev.StockVersion <= cur {
		if ev.StockVersion < cur {
			_, err = m.st.Exec(ctx, tx, "SearchStale", ev.Warehouse, ev.SKU, ev.StockVersion, cur, now)
		}
		return err
	}
	for v := max(cur+1, ev.StockVersion-maxGap); v < ev.StockVersion; v++ {
		var id, qty, sv int64
		var mv string
		var ledger any
		err := tx.QueryRow(ctx, m.st.SQL("LedgerByVersion"), ev.Warehouse, ev.SKU, v).Scan(&id, &mv, &qty, &sv)
		switch {
		case err == nil:
			ledger = id
		case !errors.Is(err, store.ErrNoRows):
			return fmt.Errorf("refetching version %d of %s/%s: %w", v, ev.Warehouse, ev.SKU, err)
		}
		if _, err := m.st.Exec(ctx, tx, "SearchGap", ev.Warehouse, ev.SKU, v, ledger, now); err != nil {
			return err
		}
	}
	// Conditional on the version: a concurrent newer apply wins.
	_, err = m.st.Exec(ctx, tx, "SearchApply", ev.Warehouse, ev.SKU, ev.StockVersion, ev.Available, ev.OnHand, now)
	return err
}

// handleStats counts movements per SKU.
func (m *Module[TTx]) handleStats(ctx context.Context, tx keelsql.Tx[TTx], d *keelevents.Delivery) error {
	ev, err := decodeEvent(d)
	if err != nil {
		return err
	}
	_, err = m.st.Exec(ctx, tx, "StatsAdd", ev.SKU, string(ev.Movement), ev.Qty)
	return err
}
