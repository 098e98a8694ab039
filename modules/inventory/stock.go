package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/keelwork/keel/module/web"
	"strconv"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/modules/inventory/domain"
	"github.com/keelwork/keel/modules/inventory/store"
)

var errInvalid = domain.ErrInvalid

// Topic carries every stock movement; the key is "warehouse/SKU", so a
// consumer sees one pair's movements in order.
const Topic = "inventory.stock"

// StockEvent is a movement as consumers see it: the ledger row and the
// balance it left, at the stock version it made.
type StockEvent struct {
	LedgerID      int64           `json:"ledger_id"`
	Warehouse     string          `json:"warehouse"`
	SKU           string          `json:"sku"`
	Movement      domain.Movement `json:"movement"`
	Qty           int64           `json:"qty"`
	ReservationID int64           `json:"reservation_id,omitempty"`
	OrderLine     string          `json:"order_line,omitempty"`
	StockVersion  int64           `json:"stock_version"`
	OnHand        int64           `json:"on_hand"`
	Available     int64           `json:"available"`
	Reserved      int64           `json:"reserved"`
}

// StockKey is the ordering key of a pair.
func StockKey(wh, sku string) string { return wh + "/" + sku }

// Result is what an action returns, and what a replay of its key returns
// again.
type Result struct {
	Action        string       `json:"action"`
	Outcome       string       `json:"outcome"` // applied, insufficient, already_done, conflict
	ReservationID int64        `json:"reservation_id,omitempty"`
	State         domain.State `json:"state,omitempty"`
	Version       int64        `json:"version,omitempty"`
	StockVersion  int64        `json:"stock_version,omitempty"`
	LedgerID      int64        `json:"ledger_id,omitempty"`
	ConflictID    int64        `json:"conflict_id,omitempty"`
	Replayed      bool         `json:"replayed"`
}

// The outcomes of Result.
const (
	OutcomeApplied      = "applied"
	OutcomeInsufficient = "insufficient"
	OutcomeDone         = "already_done"
	OutcomeConflict     = "conflict"
)

// act runs f under the idempotency key: the record and f's writes commit
// together, a replay with the same parameters returns the stored result,
// and other parameters are refused. f returning an error writes nothing.
func (m *Module[TTx]) act(ctx context.Context, key, params string, f func(tx keelsql.Tx[TTx]) (Result, error)) (Result, error) {
	var res Result
	asked := time.Now()
	err := m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		waited(ctx, asked, time.Now())
		res = Result{}
		claimed, err := m.st.ClaimAction(ctx, tx, key, params, m.now())
		if err != nil {
			return err
		}
		if !claimed {
			return m.replay(ctx, tx, key, params, &res)
		}
		if res, err = f(tx); err != nil {
			return err
		}
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		return m.st.SetActionResult(ctx, tx, key, string(b))
	})
	return res, err
}

func (m *Module[TTx]) replay(ctx context.Context, q keelsql.Querier, key, params string, res *Result) error {
	a, err := m.st.GetAction(ctx, q, key)
	if err != nil {
		return fmt.Errorf("reading action %s: %w", key, err)
	}
	if a.Params != params {
		return fmt.Errorf("%w: %s was first used with %q", ErrKeyReused, key, a.Params)
	}
	if err := json.Unmarshal([]byte(a.Result), res); err != nil {
		return fmt.Errorf("reading the result of %s: %w", key, err)
	}
	res.Replayed = true
	return nil
}

// book writes the ledger row of a movement that st (the balance after it)
// reflects, and its outbox event, in tx.
func (m *Module[TTx]) book(ctx context.Context, tx keelsql.Tx[TTx], mv domain.Movement, intent string, st store.Stock, qty int64, r *store.Reservation, reason string) (store.Entry, error) {
	e := store.Entry{Intent: intent, Warehouse: st.Warehouse, SKU: st.SKU, Movement: mv, Qty: qty,
		Delta: domain.DeltaOf(mv, qty), StockVersion: st.Version, Reason: reason, Actor: actorOf(ctx), At: m.now()}
	if r != nil {
		e.ReservationID = r.ID
	}
	if err := m.st.InsertEntry(ctx, tx, &e); err != nil {
		return e, err
	}
	ev, err := stockEvent(e, st, r)
	if err != nil {
		return e, err
	}
	if err := m.ev.EmitTx(ctx, tx, ev); err != nil {
		return e, fmt.Errorf("emitting ledger %d: %w", e.ID, err)
	}
	return e, nil
}

// stockEvent is the outbox event of ledger row e, which left the balance
// st: its id is the ledger id, its key the pair.
func stockEvent(e store.Entry, st store.Stock, r *store.Reservation) (keelevents.Event, error) {
	ev := StockEvent{LedgerID: e.ID, Warehouse: st.Warehouse, SKU: st.SKU, Movement: e.Movement, Qty: e.Qty,
		StockVersion: st.Version, OnHand: st.OnHand, Available: st.Available, Reserved: st.Reserved}
	if r != nil {
		ev.ReservationID, ev.OrderLine = r.ID, r.OrderLine
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return keelevents.Event{}, err
	}
	return keelevents.Event{Topic: Topic, ID: strconv.FormatInt(e.ID, 10), Key: StockKey(st.Warehouse, st.SKU),
		Type: "inventory." + string(e.Movement), Payload: payload}, nil
}

func actorOf(ctx context.Context) string {
	if a := keel.ActorFrom(ctx); a != "" {
		return a
	}
	return "system"
}

// classifyShort reads back a pair whose conditional update changed
// nothing: unknown pair, insufficient, or (the row had enough when read)
// a concurrent change.
func (m *Module[TTx]) classifyShort(ctx context.Context, q keelsql.Querier, wh, sku string, need int64, field func(store.Stock) int64) (store.Stock, error) {
	st, err := m.st.GetStock(ctx, q, wh, sku)
	if errors.Is(err, store.ErrNoRows) {
		return st, m.unknownPair(ctx, q, wh, sku)
	}
	if err != nil {
		return st, fmt.Errorf("reading %s/%s: %w", wh, sku, err)
	}
	if field(st) < need {
		return st, nil
	}
	return st, fmt.Errorf("%w: %s/%s", ErrConcurrent, wh, sku)
}

func (m *Module[TTx]) unknownPair(ctx context.Context, q keelsql.Querier, wh, sku string) error {
	n, err := m.st.Count(ctx, q, "WarehouseExists", wh)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w %q", ErrUnknownWH, wh)
	}
	return fmt.Errorf("%w %q in warehouse %q", ErrUnknownSKU, sku, wh)
}

// Warehouse and SKU set-up.

// Warehouse is a warehouse's description.
type Warehouse struct {
	ID, NameZh, NameEn string
}

// SKU is a SKU's description; UnitValueMinor prices adjustments for the
// approval threshold.
type SKU struct {
	ID, NameZh, NameEn string
	UnitValueMinor     int64
	Currency           string
}

// PutWarehouse creates or renames a warehouse.
func (m *Module[TTx]) PutWarehouse(ctx context.Context, w Warehouse) error {
	if err := domain.CheckID("warehouse", w.ID); err != nil {
		return err
	}
	var err error
	if w.NameZh, w.NameEn, err = checkNames(w.NameZh, w.NameEn); err != nil {
		return err
	}
	_, err = m.st.Exec(ctx, m.db, "WarehouseUpsert", w.ID, w.NameZh, w.NameEn, m.now())
	return err
}

// PutSKU creates or updates a SKU.
func (m *Module[TTx]) PutSKU(ctx context.Context, s SKU) error {
	if err := domain.CheckID("sku", s.ID); err != nil {
		return err
	}
	if s.UnitValueMinor < 0 || len(s.Currency) != 3 {
		return fmt.Errorf("%w: a SKU needs a non-negative unit value and a 3-letter currency", errInvalid)
	}
	var err error
	if s.NameZh, s.NameEn, err = checkNames(s.NameZh, s.NameEn); err != nil {
		return err
	}
	_, err = m.st.Exec(ctx, m.db, "SkuUpsert", s.ID, s.NameZh, s.NameEn, s.UnitValueMinor, s.Currency, m.now())
	return err
}

// Receive books goods into a warehouse (a receipt with a stable id): the
// pair's row is created at version 0 if new, and the receipt is a ledger
// movement like every other.
func (m *Module[TTx]) Receive(ctx context.Context, receipt, wh, sku string, qty int64) (Result, error) {
	if err := errors.Join(domain.CheckID("receipt", receipt), domain.CheckID("warehouse", wh), domain.CheckID("sku", sku), domain.CheckQty(qty)); err != nil {
		return Result{}, err
	}
	params := fmt.Sprintf("%s|%s|%d", wh, sku, qty)
	return m.act(ctx, "receive:"+receipt, params, func(tx keelsql.Tx[TTx]) (Result, error) {
		if err := m.knownPair(ctx, tx, wh, sku); err != nil {
			return Result{}, err
		}
		if _, err := m.st.Exec(ctx, tx, "StockInit", wh, sku, m.now()); err != nil {
			return Result{}, err
		}
		st, ok, err := m.st.Move(ctx, tx, "StockAdjust", wh, sku, qty, m.now())
		if err != nil || !ok {
			return Result{}, errors.Join(err, fmt.Errorf("%w: receiving into %s/%s", ErrConcurrent, wh, sku))
		}
		e, err := m.book(ctx, tx, domain.MoveReceive, "receive:"+receipt, st, qty, nil, "receipt "+receipt)
		if err != nil {
			return Result{}, err
		}
		return Result{Action: "receive", Outcome: OutcomeApplied, StockVersion: st.Version, LedgerID: e.ID}, nil
	})
}

func (m *Module[TTx]) knownPair(ctx context.Context, q keelsql.Querier, wh, sku string) error {
	n, err := m.st.Count(ctx, q, "WarehouseExists", wh)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w %q", ErrUnknownWH, wh)
	}
	var id, zh, en, cur string
	var v int64
	err = q.QueryRow(ctx, m.st.SQL("SkuGet"), sku).Scan(&id, &zh, &en, &v, &cur)
	if errors.Is(err, store.ErrNoRows) {
		return fmt.Errorf("%w %q", ErrUnknownSKU, sku)
	}
	return err
}

// checkNames applies the one text rule to a display name pair: valid
// UTF-8, no control characters, at most web.MaxNameRunes each; the
// Chinese name is required, the English one may be empty.
func checkNames(zh, en string) (string, string, error) {
	zh, err := web.Name("name_zh", zh, 0)
	if err != nil {
		return "", "", err
	}
	en, err = web.OptionalText("name_en", en, web.MaxNameRunes)
	return zh, en, err
}
