package inventory

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/modules/inventory/store"
)

const apiRoot = "/api/v1/inventory"

func (m *Module[TTx]) routes() []module.Route {
	op, view := module.RoleOperator, module.RoleViewer
	return []module.Route{
		{Pattern: "POST " + apiRoot + "/reservations", Role: op, Handle: m.apiReserve},
		{Pattern: "GET " + apiRoot + "/reservations", Role: view, Handle: m.apiReservations},
		{Pattern: "GET " + apiRoot + "/reservations/{id}", Role: view, Handle: m.apiReservation},
		{Pattern: "POST " + apiRoot + "/reservations/{id}/confirm", Role: op, Handle: m.apiConfirm},
		{Pattern: "POST " + apiRoot + "/reservations/{id}/release", Role: op, Handle: m.apiRelease},
		{Pattern: "POST " + apiRoot + "/reservations/{id}/return", Role: op, Handle: m.apiReturn},
		{Pattern: "POST " + apiRoot + "/reservations/{id}/return-received", Role: op, Handle: m.apiReturnReceived},
		{Pattern: "GET " + apiRoot + "/stock", Role: view, Handle: m.apiStock},
		{Pattern: "POST " + apiRoot + "/receipts", Role: op, Handle: m.apiReceive},
		{Pattern: "POST " + apiRoot + "/warehouses", Role: module.RoleAdmin, Handle: m.apiWarehouse},
		{Pattern: "POST " + apiRoot + "/skus", Role: module.RoleAdmin, Handle: m.apiSKU},
		{Pattern: "POST " + apiRoot + "/adjustments", Role: op, Handle: m.apiAdjust},
		{Pattern: "GET " + apiRoot + "/adjustments", Role: view, Handle: m.apiAdjustments},
		{Pattern: "GET " + apiRoot + "/conflicts", Role: view, Handle: m.apiConflicts},
		{Pattern: "GET " + apiRoot + "/conflicts/{id}", Role: view, Handle: m.apiConflict},
		{Pattern: "POST " + apiRoot + "/conflicts/{id}/resolve", Role: op, Handle: m.apiResolve},
		{Pattern: "GET " + apiRoot + "/admission", Role: view, Handle: m.apiAdmission},
		{Pattern: "POST " + apiRoot + "/admission", Role: module.RoleAdmin, Handle: m.apiSetAdmission},
	}
}

// fail turns an operation's error into the API's problem; a busy refusal
// carries Retry-After.
func fail(w http.ResponseWriter, err error) (int, any, error) {
	var busy *busyError
	if errors.As(err, &busy) {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(busy.retryAfter.Seconds()))))
	}
	return 0, nil, problem(err)
}

// answer writes an action's result: a stock shortage is a 409 problem
// (with the recorded reservation), every other outcome a 200 body.
func answer(w http.ResponseWriter, res Result, err error) (int, any, error) {
	if err != nil {
		return fail(w, err)
	}
	if res.Outcome == OutcomeInsufficient {
		return 0, nil, web.Problem(CodeInsufficient, "not enough stock: reservation %d is failed (stock version %d)", res.ReservationID, res.StockVersion)
	}
	return http.StatusOK, res, nil
}

func (m *Module[TTx]) apiReserve(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req ReserveRequest
	if err := web.Decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	res, err := m.Reserve(r.Context(), req)
	return answer(w, res, err)
}

func (m *Module[TTx]) apiConfirm(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := web.PathID(r, "id")
	if err != nil {
		return 0, nil, err
	}
	var req ConfirmRequest
	if err := web.Decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	res, err := m.Confirm(r.Context(), id, req)
	return answer(w, res, err)
}

func (m *Module[TTx]) apiRelease(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := web.PathID(r, "id")
	if err != nil {
		return 0, nil, err
	}
	var req ReleaseRequest
	if err := web.DecodeOptional(w, r, &req); err != nil {
		return 0, nil, err
	}
	res, err := m.Release(r.Context(), id, req)
	return answer(w, res, err)
}

func (m *Module[TTx]) apiReturn(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := web.PathID(r, "id")
	if err != nil {
		return 0, nil, err
	}
	var req ReleaseRequest
	if err := web.DecodeOptional(w, r, &req); err != nil {
		return 0, nil, err
	}
	res, err := m.Return(r.Context(), id, req.Reason)
	return answer(w, res, err)
}

func (m *Module[TTx]) apiReturnReceived(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := web.PathID(r, "id")
	if err != nil {
		return 0, nil, err
	}
	var req struct {
		Receipt string `json:"receipt"`
	}
	if err := web.Decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	res, err := m.ReturnReceived(r.Context(), id, req.Receipt)
	return answer(w, res, err)
}

// ReservationDetail is a reservation with its history and ledger rows.
type ReservationDetail struct {
	Reservation store.Reservation `json:"reservation"`
	History     []store.History   `json:"history"`
	Ledger      []store.Entry     `json:"ledger"`
}

// GetReservation reads a reservation with its history and ledger.
func (m *Module[TTx]) GetReservation(r *http.Request, id int64) (*ReservationDetail, error) {
	ctx := r.Context()
	res, err := m.st.GetReservation(ctx, m.db, id)
	if errors.Is(err, store.ErrNoRows) {
		return nil, web.NotFound("reservation %d", id)
	}
	if err != nil {
		return nil, err
	}
	d := &ReservationDetail{Reservation: res}
	if d.History, err = m.st.HistoryOf(ctx, m.db, id); err != nil {
		return nil, err
	}
	if d.Ledger, err = m.st.EntriesOf(ctx, m.db, id); err != nil {
		return nil, err
	}
	return d, nil
}

func (m *Module[TTx]) apiReservation(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := web.PathID(r, "id")
	if err != nil {
		return 0, nil, err
	}
	d, err := m.GetReservation(r, id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, d, nil
}

func (m *Module[TTx]) apiReservations(w http.ResponseWriter, r *http.Request) (int, any, error) {
	q := web.NewQuery(r, "state", "after", "limit")
	state, limit, after := q.Get("state"), q.Limit(web.DefaultLimit), q.AfterID("reservations")
	if q.Err != nil {
		return 0, nil, q.Err
	}
	list, err := m.listReservations(r, state, after, limit)
	if err != nil {
		return 0, nil, err
	}
	next := ""
	if len(list) == limit {
		next = web.IDCursor("reservations", list[len(list)-1].ID)
	}
	return http.StatusOK, web.NewList(list, next), nil
}

func (m *Module[TTx]) listReservations(r *http.Request, state string, after int64, limit int) ([]store.Reservation, error) {
	if after == 0 {
		after = math.MaxInt64
	}
	return m.st.ListReservations(r.Context(), m.db, state, after, limit)
}

// StockRow is a balance with the search projection's cached value, which
// is for display only: a reservation is decided by the balance.
type StockRow struct {
	store.Stock
	NameZh, NameEn string
	// Cached is the search projection's available value (-1: none yet)
	// and CachedVersion its stock version: shown, never promised.
	Cached        int64     `json:"cached_available"`
	CachedVersion int64     `json:"cached_version"`
	CachedAt      time.Time `json:"cached_at"`
	CachedNote    string    `json:"cached_note"`
}

// StockList pages balances by (warehouse, SKU).
func (m *Module[TTx]) StockList(r *http.Request, wh, afterWH, afterSKU string, limit int) ([]StockRow, error) {
	rows, err := m.db.Query(r.Context(), m.st.SQL("StockList"), wh, afterWH, afterSKU, limit)
	return collect(rows, err, func(s scanner) (StockRow, error) {
		var x StockRow
		err := s.Scan(&x.Warehouse, &x.SKU, &x.NameZh, &x.NameEn, &x.OnHand, &x.Available, &x.Reserved, &x.Sold,
			&x.Returned, &x.Version, &x.UpdatedAt, &x.Cached, &x.CachedVersion, &x.CachedAt)
		x.CachedNote = "display only, not a promise: reservations are decided by the balance"
		return x, err
	})
}

func (m *Module[TTx]) apiStock(w http.ResponseWriter, r *http.Request) (int, any, error) {
	q := web.NewQuery(r, "warehouse", "after", "limit")
	wh, limit, after := q.Get("warehouse"), q.Limit(web.DefaultLimit), q.After("stock")
	if q.Err != nil {
		return 0, nil, q.Err
	}
	aw, as := splitKey(after)
	list, err := m.StockList(r, wh, aw, as, limit)
	if err != nil {
		return 0, nil, err
	}
	next := ""
	if len(list) == limit {
		last := list[len(list)-1]
		next = web.Cursor("stock", StockKey(last.Warehouse, last.SKU))
	}
	return http.StatusOK, web.NewList(list, next), nil
}

func splitKey(k string) (string, string) {
	for i := 0; i < len(k); i++ {
		if k[i] == '/' {
			return k[:i], k[i+1:]
		}
	}
	return k, ""
}

func (m *Module[TTx]) apiReceive(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req struct {
		Receipt   string `json:"receipt"`
		Warehouse string `json:"warehouse"`
		SKU       string `json:"sku"`
		Qty       int64  `json:"qty"`
	}
	if err := web.Decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	res, err := m.Receive(r.Context(), req.Receipt, req.Warehouse, req.SKU, req.Qty)
	return answer(w, res, err)
}

func (m *Module[TTx]) apiWarehouse(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req struct {
		ID     string `json:"id"`
		NameZh string `json:"name_zh"`
		NameEn string `json:"name_en"`
	}
	if err := web.Decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	if err := m.PutWarehouse(r.Context(), Warehouse{ID: req.ID, NameZh: req.NameZh, NameEn: req.NameEn}); err != nil {
		return fail(w, err)
	}
	return http.StatusOK, req, nil
}

func (m *Module[TTx]) apiSKU(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req struct {
		ID             string `json:"id"`
		NameZh         string `json:"name_zh"`
		NameEn         string `json:"name_en"`
		UnitValueMinor int64  `json:"unit_value_minor"`
		Currency       string `json:"currency"`
	}
	if err := web.Decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	err := m.PutSKU(r.Context(), SKU{ID: req.ID, NameZh: req.NameZh, NameEn: req.NameEn, UnitValueMinor: req.UnitValueMinor, Currency: req.Currency})
	if err != nil {
		return fail(w, err)
	}
	return http.StatusOK, req, nil
}

func (m *Module[TTx]) apiAdjust(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req AdjustRequest
	if err := web.Decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	out, err := m.Adjust(r.Context(), req)
	if err != nil {
		return fail(w, err)
	}
	if out.Adjustment.State == "awaiting_approval" {
		return http.StatusAccepted, out, nil
	}
	return http.StatusOK, out, nil
}

func (m *Module[TTx]) apiAdjustments(w http.ResponseWriter, r *http.Request) (int, any, error) {
	q := web.NewQuery(r, "after", "limit")
	limit, after := q.Limit(web.DefaultLimit), q.AfterID("adjustments")
	if q.Err != nil {
		return 0, nil, q.Err
	}
	if after == 0 {
		after = math.MaxInt64
	}
	list, err := m.st.ListAdjustments(r.Context(), m.db, after, limit)
	if err != nil {
		return 0, nil, err
	}
	next := ""
	if len(list) == limit {
		next = web.IDCursor("adjustments", list[len(list)-1].ID)
	}
	return http.StatusOK, web.NewList(list, next), nil
}

func (m *Module[TTx]) apiConflicts(w http.ResponseWriter, r *http.Request) (int, any, error) {
	q := web.NewQuery(r, "state", "after", "limit")
	state, limit, after := q.Get("state"), q.Limit(web.DefaultLimit), q.AfterID("conflicts")
	if q.Err != nil {
		return 0, nil, q.Err
	}
	if after == 0 {
		after = math.MaxInt64
	}
	list, err := m.st.ListConflicts(r.Context(), m.db, state, after, limit)
	if err != nil {
		return 0, nil, err
	}
	next := ""
	if len(list) == limit {
		next = web.IDCursor("conflicts", list[len(list)-1].ID)
	}
	return http.StatusOK, web.NewList(list, next), nil
}

func (m *Module[TTx]) apiConflict(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := web.PathID(r, "id")
	if err != nil {
		return 0, nil, err
	}
	c, err := m.st.GetConflict(r.Context(), m.db, id)
	if errors.Is(err, store.ErrNoRows) {
		return 0, nil, web.NotFound("conflict %d", id)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, c, nil
}

func (m *Module[TTx]) apiResolve(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := web.PathID(r, "id")
	if err != nil {
		return 0, nil, err
	}
	var req ResolveRequest
	if err := web.Decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	out, err := m.ResolveConflict(r.Context(), id, req)
	if err != nil {
		return fail(w, err)
	}
	if out.Adjustment.State == "awaiting_approval" {
		return http.StatusAccepted, out, nil
	}
	return http.StatusOK, out, nil
}

func (m *Module[TTx]) apiAdmission(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if q := web.NewQuery(r); q.Err != nil {
		return 0, nil, q.Err
	}
	return http.StatusOK, map[string]any{"admission": m.Admission(), "coalescing": m.Coalescing(),
		"paused_deliveries": m.pausedDeliveries.Load()}, nil
}

func (m *Module[TTx]) apiSetAdmission(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req struct {
		Busy   *bool  `json:"busy"`
		Reason string `json:"reason"`
	}
	if err := web.Decode(w, r, &req); err != nil {
		return 0, nil, err
	}
	if req.Busy == nil {
		return 0, nil, web.Invalid("busy (true or false) is required")
	}
	if err := m.SetBusy(r.Context(), *req.Busy, req.Reason); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, m.Admission(), nil
}

// ConflictView is a conflict ticket as the API lists it.
type ConflictView = store.Conflict
