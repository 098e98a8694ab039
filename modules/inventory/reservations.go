package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/modules/inventory/domain"
	"github.com/keelwork/keel/modules/inventory/store"
)

// ReserveRequest asks stock for one order line. The order line is the
// idempotency key of the reservation: ("reserve", order line).
type ReserveRequest struct {
	OrderLine string `json:"order_line"`
	Warehouse string `json:"warehouse"`
	SKU       string `json:"sku"`
	Qty       int64  `json:"qty"`
}

func (r *ReserveRequest) check() error {
	return errors.Join(domain.CheckID("order line", r.OrderLine), domain.CheckID("warehouse", r.Warehouse),
		domain.CheckID("sku", r.SKU), domain.CheckQty(r.Qty))
}

func (r *ReserveRequest) params() string { return fmt.Sprintf("%s|%s|%d", r.Warehouse, r.SKU, r.Qty) }

func reserveKey(line string) string { return "reserve:" + line }

// Reserve moves qty from available to reserved with one conditional
// update, or records the order line's reservation as failed when the
// stock is short. Admission control refuses it first when the inventory is
// over its watermark (ErrBusy: nothing written).
func (m *Module[TTx]) Reserve(ctx context.Context, req ReserveRequest) (Result, error) {
	if err := req.check(); err != nil {
		return Result{}, err
	}
	if err := m.adm.admit(); err != nil {
		return Result{}, err
	}
	ctx, done := m.adm.begin(ctx)
	defer done()
	if m.co != nil {
		return m.co.reserve(ctx, req)
	}
	return m.reservePlain(ctx, req)
}

// reserveSlot takes one of the Settings.ReservationConns slots for a
// reservation transaction, waiting at most PoolWaitBudget (wait < 0: as
// long as ctx lives); done gives it back. Without it a flood of
// reservations (each holding a pool connection while it waits for a
// hot row's lock) took every connection, and confirmations and releases
// queued behind them for the pool: they are the share the watermark
// keeps, so reservations never hold more than their slots. Time spent
// waiting here counts as pool wait for the watermark.
func (m *Module[TTx]) reserveSlot(ctx context.Context, wait time.Duration) (done func(), err error) {
	done = func() { <-m.gate }
	select {
	case m.gate <- struct{}{}:
		return done, nil
	default:
	}
	slotAsked(ctx, time.Now())
	var timeout <-chan time.Time
	if wait >= 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case m.gate <- struct{}{}:
		return done, nil
	case <-timeout:
		return nil, m.adm.refuse()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// reservePlain is the row-lock path: one conditional UPDATE per request.
func (m *Module[TTx]) reservePlain(ctx context.Context, req ReserveRequest) (Result, error) {
	done, err := m.reserveSlot(ctx, m.adm.waitBudget)
	if err != nil {
		return Result{}, err
	}
	defer done()
	return m.act(ctx, reserveKey(req.OrderLine), req.params(), func(tx keelsql.Tx[TTx]) (Result, error) {
		st, ok, err := m.st.Move(ctx, tx, "StockReserve", req.Warehouse, req.SKU, req.Qty, m.now())
		if err != nil {
			return Result{}, err
		}
		if !ok {
			cur, err := m.classifyShort(ctx, tx, req.Warehouse, req.SKU, req.Qty, func(s store.Stock) int64 { return s.Available })
			if err != nil {
				return Result{}, err
			}
			return m.recordFailed(ctx, tx, req, cur)
		}
		return m.recordReserved(ctx, tx, req, st)
	})
}

// recordReserved writes the reservation, its ledger row, event and
// history for a granted request whose balance after the grant is st.
func (m *Module[TTx]) recordReserved(ctx context.Context, tx keelsql.Tx[TTx], req ReserveRequest, st store.Stock) (Result, error) {
	now := m.now()
	r := store.Reservation{OrderLine: req.OrderLine, Warehouse: req.Warehouse, SKU: req.SKU, Qty: req.Qty,
		State: domain.Reserved, StockVersion: st.Version, ExpiresAt: now.Add(m.set.ReservationTTL), CreatedAt: now}
	if err := m.st.InsertReservation(ctx, tx, &r); err != nil {
		return Result{}, err
	}
	e, err := m.book(ctx, tx, domain.MoveReserve, reserveKey(req.OrderLine), st, req.Qty, &r, "order line "+req.OrderLine)
	if err != nil {
		return Result{}, err
	}
	h := store.History{Version: 1, From: domain.Pending, To: domain.Reserved, Action: string(domain.ActReserve),
		LedgerID: e.ID, Detail: fmt.Sprintf("stock version %d", st.Version), Actor: actorOf(ctx), At: now}
	if err := m.st.InsertHistory(ctx, tx, r.ID, h); err != nil {
		return Result{}, err
	}
	return Result{Action: "reserve", Outcome: OutcomeApplied, ReservationID: r.ID, State: r.State, Version: 1,
		StockVersion: st.Version, LedgerID: e.ID}, nil
}

// recordFailed writes the order line's reservation in 失败: no balance
// change, no ledger row, no event.
func (m *Module[TTx]) recordFailed(ctx context.Context, tx keelsql.Tx[TTx], req ReserveRequest, cur store.Stock) (Result, error) {
	now := m.now()
	r := store.Reservation{OrderLine: req.OrderLine, Warehouse: req.Warehouse, SKU: req.SKU, Qty: req.Qty,
		State: domain.Failed, StockVersion: cur.Version, ExpiresAt: now, CreatedAt: now}
	if err := m.st.InsertReservation(ctx, tx, &r); err != nil {
		return Result{}, err
	}
	h := store.History{Version: 1, From: domain.Pending, To: domain.Failed, Action: string(domain.ActFail),
		Detail: fmt.Sprintf("available %d < %d at stock version %d", cur.Available, req.Qty, cur.Version), Actor: actorOf(ctx), At: now}
	if err := m.st.InsertHistory(ctx, tx, r.ID, h); err != nil {
		return Result{}, err
	}
	return Result{Action: "reserve", Outcome: OutcomeInsufficient, ReservationID: r.ID, State: r.State, Version: 1,
		StockVersion: cur.Version}, nil
}

// ConfirmRequest is the warehouse's shipment confirmation of a
// reservation: its receipt id and the stock version it saw.
type ConfirmRequest struct {
	Receipt      string `json:"receipt"`
	StockVersion int64  `json:"stock_version"`
}

// ReleaseRequest cancels a reservation; the reason goes to its history
// (it is not a parameter of the key: a second cancel for another reason
// is the same release).
type ReleaseRequest struct {
	Reason string `json:"reason"`
}

// Confirm moves 已预占 → 已确认 and books the shipment. A confirm arriving
// at 已释放 changes nothing and opens a conflict ticket.
func (m *Module[TTx]) Confirm(ctx context.Context, id int64, req ConfirmRequest) (Result, error) {
	if err := domain.CheckID("receipt", req.Receipt); err != nil {
		return Result{}, err
	}
	if id <= 0 || req.StockVersion < 0 {
		return Result{}, fmt.Errorf("%w: reservation id and stock version must be positive", errInvalid)
	}
	params := fmt.Sprintf("%s|%d", req.Receipt, req.StockVersion)
	detail := fmt.Sprintf("receipt %s, warehouse saw stock version %d", req.Receipt, req.StockVersion)
	return m.act(ctx, actionKey("confirm", id), params, func(tx keelsql.Tx[TTx]) (Result, error) {
		return m.move(ctx, tx, id, domain.ActConfirm, -1, detail, req)
	})
}

// Release moves 已预占 → 已释放 and gives the stock back. A release
// arriving at 已确认 changes nothing and opens a conflict ticket.
func (m *Module[TTx]) Release(ctx context.Context, id int64, req ReleaseRequest) (Result, error) {
	if id <= 0 {
		return Result{}, fmt.Errorf("%w: reservation id must be positive", errInvalid)
	}
	if len(req.Reason) > 500 {
		return Result{}, fmt.Errorf("%w: the reason is limited to 500 bytes", errInvalid)
	}
	return m.act(ctx, actionKey("release", id), "", func(tx keelsql.Tx[TTx]) (Result, error) {
		return m.move(ctx, tx, id, domain.ActRelease, -1, "cancel: "+req.Reason, req)
	})
}

// Return starts a return of a confirmed reservation (已确认 → 退货处理中).
func (m *Module[TTx]) Return(ctx context.Context, id int64, reason string) (Result, error) {
	if id <= 0 || len(reason) > 500 {
		return Result{}, fmt.Errorf("%w: reservation id must be positive, the reason at most 500 bytes", errInvalid)
	}
	return m.act(ctx, actionKey("return", id), "", func(tx keelsql.Tx[TTx]) (Result, error) {
		return m.move(ctx, tx, id, domain.ActReturnStart, -1, "return: "+reason, nil)
	})
}

// ReturnReceived books the returned goods (退货处理中 → 已退回) on the
// warehouse's receipt.
func (m *Module[TTx]) ReturnReceived(ctx context.Context, id int64, receipt string) (Result, error) {
	if err := domain.CheckID("receipt", receipt); err != nil || id <= 0 {
		return Result{}, errors.Join(err, fmt.Errorf("%w: reservation id must be positive", errInvalid))
	}
	return m.act(ctx, actionKey("return_received", id), receipt, func(tx keelsql.Tx[TTx]) (Result, error) {
		return m.move(ctx, tx, id, domain.ActReturnFinish, -1, "receipt "+receipt, nil)
	})
}

func actionKey(act string, id int64) string { return act + ":" + strconv.FormatInt(id, 10) }

// move applies act to reservation id: the state move is conditional (on
// the state, and on atVersion when it is not -1); zero rows are read back
// and classified by the transition table.
func (m *Module[TTx]) move(ctx context.Context, tx keelsql.Tx[TTx], id int64, act domain.Action, atVersion int64, detail string, request any) (Result, error) {
	r, err := m.st.GetReservation(ctx, tx, id)
	if errors.Is(err, store.ErrNoRows) {
		return Result{}, fmt.Errorf("%w: reservation %d", ErrNotFound, id)
	}
	if err != nil {
		return Result{}, err
	}
	res := Result{Action: string(act), ReservationID: id}
	from := fromState(act)
	_, to := domain.Decide(from, act)
	now := m.now()
	var v int64
	var ok bool
	if atVersion >= 0 {
		v, ok, err = m.st.MoveReservationAt(ctx, tx, id, from, to, atVersion, now)
	} else {
		v, ok, err = m.st.MoveReservation(ctx, tx, id, from, to, now)
	}
	if err != nil {
		return res, fmt.Errorf("moving reservation %d: %w", id, err)
	}
	if !ok {
		cur, err := m.st.GetReservation(ctx, tx, id)
		if err != nil {
			return res, err
		}
		res.State, res.Version, res.StockVersion = cur.State, cur.Version, cur.StockVersion
		if atVersion >= 0 && cur.State == from {
			// Still in from, at another version: moved and back, or checked
			// on stale data. Nothing to do now.
			return res, fmt.Errorf("%w: reservation %d is at version %d, not %d", ErrConcurrent, id, cur.Version, atVersion)
		}
		switch out, _ := domain.Decide(cur.State, act); out {
		case domain.Done:
			res.Outcome = OutcomeDone
			return res, nil
		case domain.Clash:
			c, err := m.openClash(ctx, tx, cur, act, detail, request)
			if err != nil {
				return res, err
			}
			res.Outcome, res.ConflictID = OutcomeConflict, c
			return res, nil
		default:
			return res, fmt.Errorf("%w: %s is not possible at %s", ErrState, act, cur.State)
		}
	}
	h := store.History{Version: v, From: from, To: to, Action: string(act), Detail: detail, Actor: actorOf(ctx), At: now}
	res.State, res.Version, res.Outcome = to, v, OutcomeApplied
	if mv, books := domain.MovementOf(act); books {
		stmt := map[domain.Movement]string{domain.MoveConfirm: "StockConfirm", domain.MoveRelease: "StockRelease",
			domain.MoveReturn: "StockReturn"}[mv]
		st, ok, err := m.st.Move(ctx, tx, stmt, r.Warehouse, r.SKU, r.Qty, now)
		if err != nil {
			return res, err
		}
		if !ok {
			// A reservation in 已预占 always has its quantity reserved: the
			// books disagree, which reconciliation must see, not this call hide.
			return res, fmt.Errorf("%w: %s/%s has less reserved than reservation %d holds", ErrConcurrent, r.Warehouse, r.SKU, id)
		}
		e, err := m.book(ctx, tx, mv, actionKey(string(act), id), st, r.Qty, &r, detail)
		if err != nil {
			return res, err
		}
		h.LedgerID, res.LedgerID, res.StockVersion = e.ID, e.ID, st.Version
	}
	if err := m.st.InsertHistory(ctx, tx, id, h); err != nil {
		return res, err
	}
	return res, nil
}

// fromState is the state an action moves a reservation out of.
func fromState(act domain.Action) domain.State {
	for _, t := range domain.Table() {
		if t.Act == act {
			return t.From
		}
	}
	return ""
}

// openClash opens the conflict ticket of an action that arrived after the
// opposite one won, with the evidence: the request, the reservation, its
// ledger rows and the pair's balance.
func (m *Module[TTx]) openClash(ctx context.Context, tx keelsql.Tx[TTx], r store.Reservation, act domain.Action, detail string, request any) (int64, error) {
	entries, err := m.st.EntriesOf(ctx, tx, r.ID)
	if err != nil {
		return 0, err
	}
	st, err := m.st.GetStock(ctx, tx, r.Warehouse, r.SKU)
	if err != nil {
		return 0, err
	}
	ev, err := json.Marshal(map[string]any{"request": request, "action": act, "detail": detail, "reservation": r,
		"ledger": entries, "stock": st})
	if err != nil {
		return 0, err
	}
	c := store.Conflict{Intent: actionKey(string(act), r.ID), ReservationID: r.ID, Warehouse: r.Warehouse, SKU: r.SKU,
		Kind: string(act) + "_after_" + string(r.State), Evidence: string(ev), OpenedAt: m.now()}
	if err := m.st.OpenConflict(ctx, tx, &c); err != nil {
		return 0, err
	}
	return c.ID, nil
}
