// Package store holds every SQL statement of the inventory, behind one
// type. Statements are in queries/<dialect>/*.sql; the methods take the
// querier (a transaction or the database) so that a caller composes one
// transaction of several of them.
package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsql/sqlfile"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/modules/inventory/domain"
)

//go:embed queries/postgres/*.sql queries/sqlite/*.sql
var queryFiles embed.FS

// ErrNoRows is keelsql's.
var ErrNoRows = keelsql.ErrNoRows

// Store runs the inventory's statements.
type Store struct {
	q  sqlfile.Set
	pg bool
}

// New loads the statements of dialect.
func New(dialect string) (*Store, error) {
	q, err := module.LoadQueries(queryFiles, "queries", dialect)
	if err != nil {
		return nil, err
	}
	return &Store{q: q, pg: dialect == "postgres"}, nil
}

// SQL returns a statement by name (for the few callers that run one
// directly: tests, reconcilers).
func (s *Store) SQL(name string) string { return s.q.Get(name) }

// Stock is one (warehouse, SKU) balance.
type Stock struct {
	Warehouse, SKU string
	domain.Balance
	Version   int64
	UpdatedAt time.Time
}

func scanBalance(r keelsql.Row, b *domain.Balance, version *int64, extra ...any) error {
	return r.Scan(append([]any{&b.OnHand, &b.Available, &b.Reserved, &b.Sold, &b.Returned, version}, extra...)...)
}

// GetStock reads a balance; ErrNoRows when the pair has none.
func (s *Store) GetStock(ctx context.Context, q keelsql.Querier, wh, sku string) (Stock, error) {
	st := Stock{Warehouse: wh, SKU: sku}
	err := scanBalance(q.QueryRow(ctx, s.q.Get("StockGet"), wh, sku), &st.Balance, &st.Version, &st.UpdatedAt)
	return st, err
}

// Move runs one of the single-row balance statements (StockReserve,
// StockRelease, StockConfirm, StockReturn, StockAdjust). ok is false when
// its condition failed (no row changed).
func (s *Store) Move(ctx context.Context, q keelsql.Querier, stmt, wh, sku string, qty int64, now time.Time) (Stock, bool, error) {
	st := Stock{Warehouse: wh, SKU: sku, UpdatedAt: now}
	err := scanBalance(q.QueryRow(ctx, s.q.Get(stmt), wh, sku, qty, now), &st.Balance, &st.Version)
	if errors.Is(err, keelsql.ErrNoRows) {
		return st, false, nil
	}
	if err != nil {
		return st, false, fmt.Errorf("%s %s/%s: %w", stmt, wh, sku, err)
	}
	return st, true, nil
}

// Entry is one ledger row.
type Entry struct {
	ID            int64
	Intent        string
	Warehouse     string
	SKU           string
	Movement      domain.Movement
	Qty           int64
	Delta         domain.Delta
	StockVersion  int64
	ReservationID int64
	Reason, Actor string
	At            time.Time
}

// InsertEntry books a movement; the unique intent refuses a second booking.
func (s *Store) InsertEntry(ctx context.Context, q keelsql.Querier, e *Entry) error {
	var res any
	if e.ReservationID != 0 {
		res = e.ReservationID
	}
	d := e.Delta
	err := q.QueryRow(ctx, s.q.Get("LedgerInsert"), e.Intent, e.Warehouse, e.SKU, string(e.Movement), e.Qty,
		d.OnHand, d.Available, d.Reserved, d.Sold, d.Returned, e.StockVersion, res, e.Reason, e.Actor, e.At).Scan(&e.ID)
	if err != nil {
		return fmt.Errorf("booking %s: %w", e.Intent, err)
	}
	return nil
}

func scanEntry(r keelsql.Rows) (Entry, error) {
	var e Entry
	var m string
	err := r.Scan(&e.ID, &e.Intent, &e.Warehouse, &e.SKU, &m, &e.Qty, &e.Delta.OnHand, &e.Delta.Available,
		&e.Delta.Reserved, &e.Delta.Sold, &e.Delta.Returned, &e.StockVersion, &e.ReservationID, &e.Reason, &e.Actor, &e.At)
	e.Movement = domain.Movement(m)
	return e, err
}

// EntriesOf lists a reservation's ledger rows.
func (s *Store) EntriesOf(ctx context.Context, q keelsql.Querier, reservation int64) ([]Entry, error) {
	rows, err := q.Query(ctx, s.q.Get("LedgerByReservation"), reservation)
	return keelsql.CollectRows(rows, err, scanEntry)
}

// Entries lists a pair's latest ledger rows.
func (s *Store) Entries(ctx context.Context, q keelsql.Querier, wh, sku string, limit int) ([]Entry, error) {
	rows, err := q.Query(ctx, s.q.Get("LedgerList"), wh, sku, limit)
	return keelsql.CollectRows(rows, err, scanEntry)
}

// Action is an idempotency record.
type Action struct {
	Params, Result string
}

// ClaimAction inserts the record of key; false means one exists (read it
// with GetAction: on PostgreSQL the insert waited for its writer).
func (s *Store) ClaimAction(ctx context.Context, q keelsql.Querier, key, params string, now time.Time) (bool, error) {
	n, err := q.Exec(ctx, s.q.Get("ActionInsert"), key, params, now)
	if err != nil {
		return false, fmt.Errorf("recording action %s: %w", key, err)
	}
	return n == 1, nil
}

// GetAction reads the record of key.
func (s *Store) GetAction(ctx context.Context, q keelsql.Querier, key string) (Action, error) {
	var a Action
	err := q.QueryRow(ctx, s.q.Get("ActionGet"), key).Scan(&a.Params, &a.Result)
	return a, err
}

// SetActionResult stores the first result of key.
func (s *Store) SetActionResult(ctx context.Context, q keelsql.Querier, key, result string) error {
	_, err := q.Exec(ctx, s.q.Get("ActionResult"), key, result)
	return err
}

// Reservation is one 预占单.
type Reservation struct {
	ID           int64
	OrderLine    string
	Warehouse    string
	SKU          string
	Qty          int64
	State        domain.State
	Version      int64
	StockVersion int64
	ExpiresAt    time.Time
	CheckAfter   time.Time
	Checks       int
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

func scanReservation(r keelsql.Row) (Reservation, error) {
	var x Reservation
	var st string
	err := r.Scan(&x.ID, &x.OrderLine, &x.Warehouse, &x.SKU, &x.Qty, &st, &x.Version, &x.StockVersion, &x.ExpiresAt,
		&x.CheckAfter, &x.Checks, &x.CreatedAt, &x.UpdatedAt)
	x.State = domain.State(st)
	return x, err
}

// InsertReservation writes a reservation at version 1.
func (s *Store) InsertReservation(ctx context.Context, q keelsql.Querier, r *Reservation) error {
	err := q.QueryRow(ctx, s.q.Get("ReservationInsert"), r.OrderLine, r.Warehouse, r.SKU, r.Qty, string(r.State),
		r.StockVersion, r.ExpiresAt, r.CreatedAt).Scan(&r.ID)
	if err != nil {
		return fmt.Errorf("writing the reservation of %s: %w", r.OrderLine, err)
	}
	r.Version, r.CheckAfter, r.UpdatedAt = 1, r.ExpiresAt, r.CreatedAt
	return nil
}

// GetReservation reads one by id.
func (s *Store) GetReservation(ctx context.Context, q keelsql.Querier, id int64) (Reservation, error) {
	return scanReservation(q.QueryRow(ctx, s.q.Get("ReservationGet"), id))
}

// ReservationByLine reads one by order line.
func (s *Store) ReservationByLine(ctx context.Context, q keelsql.Querier, line string) (Reservation, error) {
	return scanReservation(q.QueryRow(ctx, s.q.Get("ReservationByLine"), line))
}

// ListReservations pages reservations newest first (before: an id bound).
func (s *Store) ListReservations(ctx context.Context, q keelsql.Querier, state string, before int64, limit int) ([]Reservation, error) {
	rows, err := q.Query(ctx, s.q.Get("ReservationList"), state, before, limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Reservation, error) { return scanReservation(r) })
}

// MoveReservation moves from → to; ok false when it was not in from.
func (s *Store) MoveReservation(ctx context.Context, q keelsql.Querier, id int64, from, to domain.State, now time.Time) (int64, bool, error) {
	var v int64
	err := q.QueryRow(ctx, s.q.Get("ReservationMove"), id, string(from), string(to), now).Scan(&v)
	if errors.Is(err, keelsql.ErrNoRows) {
		return 0, false, nil
	}
	return v, err == nil, err
}

// MoveReservationAt moves from → to only at version.
func (s *Store) MoveReservationAt(ctx context.Context, q keelsql.Querier, id int64, from, to domain.State, version int64, now time.Time) (int64, bool, error) {
	var v int64
	err := q.QueryRow(ctx, s.q.Get("ReservationMoveAt"), id, string(from), string(to), version, now).Scan(&v)
	if errors.Is(err, keelsql.ErrNoRows) {
		return 0, false, nil
	}
	return v, err == nil, err
}

// History is one step of a reservation.
type History struct {
	Version  int64
	From, To domain.State
	Action   string
	LedgerID int64
	Detail   string
	Actor    string
	At       time.Time
}

// InsertHistory records a step.
func (s *Store) InsertHistory(ctx context.Context, q keelsql.Querier, id int64, h History) error {
	var ledger any
	if h.LedgerID != 0 {
		ledger = h.LedgerID
	}
	_, err := q.Exec(ctx, s.q.Get("HistoryInsert"), id, h.Version, string(h.From), string(h.To), h.Action, ledger, h.Detail, h.Actor, h.At)
	if err != nil {
		return fmt.Errorf("recording the history of reservation %d: %w", id, err)
	}
	return nil
}

// HistoryOf lists a reservation's steps.
func (s *Store) HistoryOf(ctx context.Context, q keelsql.Querier, id int64) ([]History, error) {
	rows, err := q.Query(ctx, s.q.Get("HistoryList"), id)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (History, error) {
		var h History
		var from, to string
		err := r.Scan(&h.Version, &from, &to, &h.Action, &h.LedgerID, &h.Detail, &h.Actor, &h.At)
		h.From, h.To = domain.State(from), domain.State(to)
		return h, err
	})
}

// Conflict is a 冲突核验 ticket.
type Conflict struct {
	ID            int64
	Intent        string
	ReservationID int64
	Warehouse     string
	SKU           string
	Kind          string
	State         string
	Evidence      string
	OpenedAt      time.Time
	ResolvedAt    *time.Time
	Resolution    string
	AdjustmentID  int64
}

func scanConflict(r keelsql.Row) (Conflict, error) {
	var c Conflict
	err := r.Scan(&c.ID, &c.Intent, &c.ReservationID, &c.Warehouse, &c.SKU, &c.Kind, &c.State, &c.Evidence, &c.OpenedAt,
		&c.ResolvedAt, &c.Resolution, &c.AdjustmentID)
	return c, err
}

// OpenConflict opens a ticket once per intent and returns its id.
func (s *Store) OpenConflict(ctx context.Context, q keelsql.Querier, c *Conflict) error {
	var res any
	if c.ReservationID != 0 {
		res = c.ReservationID
	}
	err := q.QueryRow(ctx, s.q.Get("ConflictInsert"), c.Intent, res, c.Warehouse, c.SKU, c.Kind, c.Evidence, c.OpenedAt).Scan(&c.ID)
	if errors.Is(err, keelsql.ErrNoRows) {
		err = q.QueryRow(ctx, s.q.Get("ConflictByIntent"), c.Intent).Scan(&c.ID)
	}
	if err != nil {
		return fmt.Errorf("opening conflict %s: %w", c.Intent, err)
	}
	return nil
}

// GetConflict reads a ticket.
func (s *Store) GetConflict(ctx context.Context, q keelsql.Querier, id int64) (Conflict, error) {
	return scanConflict(q.QueryRow(ctx, s.q.Get("ConflictGet"), id))
}

// ListConflicts pages tickets newest first.
func (s *Store) ListConflicts(ctx context.Context, q keelsql.Querier, state string, before int64, limit int) ([]Conflict, error) {
	rows, err := q.Query(ctx, s.q.Get("ConflictList"), state, before, limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Conflict, error) { return scanConflict(r) })
}

// Exec runs a named statement, returning the rows it changed.
func (s *Store) Exec(ctx context.Context, q keelsql.Querier, name string, args ...any) (int64, error) {
	n, err := q.Exec(ctx, s.q.Get(name), args...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}

// Adjustment is an explicit correction of a balance.
type Adjustment struct {
	ID          int64
	Intent      string
	Warehouse   string
	SKU         string
	Delta       int64
	ValueMinor  int64
	Currency    string
	Reason      string
	State       string
	RequestedBy string
	ApprovedBy  string
	ConflictID  int64
	LedgerID    int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

func scanAdjustment(r keelsql.Row) (Adjustment, error) {
	var a Adjustment
	err := r.Scan(&a.ID, &a.Intent, &a.Warehouse, &a.SKU, &a.Delta, &a.ValueMinor, &a.Currency, &a.Reason, &a.State,
		&a.RequestedBy, &a.ApprovedBy, &a.ConflictID, &a.LedgerID, &a.CreatedAt, &a.UpdatedAt)
	return a, err
}

// InsertAdjustment writes an adjustment once per intent; created is false
// when it existed (its id is read back).
func (s *Store) InsertAdjustment(ctx context.Context, q keelsql.Querier, a *Adjustment) (bool, error) {
	var conflict any
	if a.ConflictID != 0 {
		conflict = a.ConflictID
	}
	err := q.QueryRow(ctx, s.q.Get("AdjustmentInsert"), a.Intent, a.Warehouse, a.SKU, a.Delta, a.ValueMinor, a.Currency,
		a.Reason, a.State, a.RequestedBy, conflict, a.CreatedAt).Scan(&a.ID)
	if errors.Is(err, keelsql.ErrNoRows) {
		return false, q.QueryRow(ctx, s.q.Get("AdjustmentByIntent"), a.Intent).Scan(&a.ID)
	}
	if err != nil {
		return false, fmt.Errorf("writing adjustment %s: %w", a.Intent, err)
	}
	return true, nil
}

// GetAdjustment reads one.
func (s *Store) GetAdjustment(ctx context.Context, q keelsql.Querier, id int64) (Adjustment, error) {
	return scanAdjustment(q.QueryRow(ctx, s.q.Get("AdjustmentGet"), id))
}

// ListAdjustments pages adjustments newest first.
func (s *Store) ListAdjustments(ctx context.Context, q keelsql.Querier, before int64, limit int) ([]Adjustment, error) {
	rows, err := q.Query(ctx, s.q.Get("AdjustmentList"), before, limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Adjustment, error) { return scanAdjustment(r) })
}

// Count runs a count(*) statement.
func (s *Store) Count(ctx context.Context, q keelsql.Querier, name string, args ...any) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, s.q.Get(name), args...).Scan(&n)
	return n, err
}
