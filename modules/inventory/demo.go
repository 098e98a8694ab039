package inventory

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/keelwork/keel/modules/inventory/sim"
)

// demoSKUs are `keel dev`'s catalogue; the first is the flash sale's.
var demoSKUs = []SKU{
	{ID: "SKU-PHONE-X", NameZh: "限量手机 X", NameEn: "Limited phone X", UnitValueMinor: 599900, Currency: "CNY"},
	{ID: "SKU-TEA-100G", NameZh: "龙井茶 100 克", NameEn: "Longjing tea 100 g", UnitValueMinor: 8800, Currency: "CNY"},
	{ID: "SKU-MUG", NameZh: "陶瓷马克杯", NameEn: "Ceramic mug", UnitValueMinor: 3900, Currency: "CNY"},
	{ID: "SKU-CABLE-C", NameZh: "USB-C 数据线", NameEn: "USB-C cable", UnitValueMinor: 2900, Currency: "CNY"},
}

var demoWarehouses = []Warehouse{
	{ID: "WH-SH", NameZh: "上海仓", NameEn: "Shanghai"},
	{ID: "WH-BJ", NameZh: "北京仓", NameEn: "Beijing"},
}

// demo holds `keel dev`'s simulators.
type demo struct {
	orders *sim.OrderService
	wh     *sim.Warehouse
	mu     sync.Mutex
	n      int
}

// openDemo starts the order service and warehouse simulators and points
// the module at them (unless settings name real ones). It runs when the
// module is built, before the host starts anything: the leader's first
// reconciliation runs right after the engine starts, and a shipments run
// with no warehouse yet would fail at every `keel dev` start.
func (m *Module[TTx]) openDemo() error {
	orders, err := sim.NewOrderService()
	if err != nil {
		return fmt.Errorf("inventory demo: %w", err)
	}
	wh, err := sim.NewWarehouse()
	if err != nil {
		_ = orders.Close(context.Background())
		return fmt.Errorf("inventory demo: %w", err)
	}
	m.demo = &demo{orders: orders, wh: wh}
	if m.set.OrderURL == "" && m.set.WarehouseURL == "" {
		m.SetOutside(orders.URL(), wh.URL())
	}
	return nil
}

// startDemo seeds the catalogue and stock (idempotent receipts) and runs
// the flash sale loop on the simulators openDemo started.
func (m *Module[TTx]) startDemo(ctx context.Context) error {
	if m.demo == nil {
		if err := m.openDemo(); err != nil {
			return err
		}
	}
	for _, w := range demoWarehouses {
		if err := m.PutWarehouse(ctx, w); err != nil {
			return fmt.Errorf("inventory demo: %w", err)
		}
	}
	for _, s := range demoSKUs {
		if err := m.PutSKU(ctx, s); err != nil {
			return fmt.Errorf("inventory demo: %w", err)
		}
		for i, w := range demoWarehouses {
			qty := int64(200 + 100*i)
			if s.ID == demoSKUs[0].ID {
				qty = 100
			}
			if _, err := m.Receive(ctx, "demo-init-"+w.ID+"-"+s.ID, w.ID, s.ID, qty); err != nil {
				return fmt.Errorf("inventory demo: %w", err)
			}
		}
	}
	if m.set.DemoFlashSale {
		m.Life.Go(m.flashSaleLoop)
	}
	return nil
}

// stopDemo closes the simulators.
func (m *Module[TTx]) stopDemo(ctx context.Context) error {
	if m.demo == nil {
		return nil
	}
	return errors.Join(m.demo.orders.Close(ctx), m.demo.wh.Close(ctx))
}

// flashSaleLoop is the simulated flash sale: every few seconds a burst of
// concurrent buyers reserves the hot SKU (through the coalescer); the
// order service pays for most, cancels some; the warehouse ships the paid
// ones and confirms them; the timeout check releases the cancelled ones
// after asking. When the hot SKU sells out it is restocked.
func (m *Module[TTx]) flashSaleLoop(ctx context.Context) {
	t := time.NewTicker(3 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.flashSaleRound(ctx)
		}
	}
}

func (m *Module[TTx]) flashSaleRound(ctx context.Context) {
	d := m.demo
	hot, wh := demoSKUs[0].ID, demoWarehouses[0].ID
	d.mu.Lock()
	d.n++
	round := d.n
	d.mu.Unlock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var granted []Result
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			line := fmt.Sprintf("demo-%d-%d-%d", time.Now().Unix(), round, i)
			res, err := m.Reserve(ctx, ReserveRequest{OrderLine: line, Warehouse: wh, SKU: hot, Qty: 1})
			if err != nil || res.Outcome != OutcomeApplied {
				return
			}
			if rand.IntN(5) == 0 {
				d.orders.Set(line, "cancelled")
			} else {
				d.orders.Set(line, "paid")
				mu.Lock()
				granted = append(granted, res)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, res := range granted {
		receipt := fmt.Sprintf("SHIP-%d", res.ReservationID)
		d.wh.Ship(sim.Receipt{ReservationID: res.ReservationID, Receipt: receipt, Warehouse: wh, SKU: hot, Qty: 1, ShippedAt: time.Now().UTC()})
		if _, err := m.Confirm(ctx, res.ReservationID, ConfirmRequest{Receipt: receipt, StockVersion: res.StockVersion}); err != nil && ctx.Err() == nil {
			m.Log.Warn("inventory demo: confirm", "err", err)
		}
	}
	if st, err := m.st.GetStock(ctx, m.db, wh, hot); err == nil && st.Available == 0 {
		_, _ = m.Receive(ctx, fmt.Sprintf("demo-restock-%d-%d", time.Now().Unix(), round), wh, hot, 100)
	}
}
