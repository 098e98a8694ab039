package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/modules/inventory/domain"
)

// The coalesced path's statements: one per kind of row for a whole batch.
// Lists travel as one JSON argument, read by jsonb_array_elements on
// PostgreSQL and json_each on SQLite.

func jsonArg(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// ClaimActions records the keys (with their parameters) that are new and
// returns them; a key already recorded is absent (read it with
// GetActions).
func (s *Store) ClaimActions(ctx context.Context, q keelsql.Querier, keys, params []string, now time.Time) (map[string]bool, error) {
	list := make([][2]string, len(keys))
	for i := range keys {
		list[i] = [2]string{keys[i], params[i]}
	}
	arg, err := jsonArg(list)
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, s.q.Get("ActionClaimMany"), arg, now)
	claimed, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (string, error) {
		var k string
		return k, r.Scan(&k)
	})
	if err != nil {
		return nil, fmt.Errorf("recording %d actions: %w", len(keys), err)
	}
	out := make(map[string]bool, len(claimed))
	for _, k := range claimed {
		out[k] = true
	}
	return out, nil
}

// GetActions reads the records of keys.
func (s *Store) GetActions(ctx context.Context, q keelsql.Querier, keys []string) (map[string]Action, error) {
	rows, err := q.Query(ctx, s.q.Get("ActionGetMany"), keelsql.ArrayOf(keys))
	type kv struct {
		k string
		a Action
	}
	list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (kv, error) {
		var x kv
		return x, r.Scan(&x.k, &x.a.Params, &x.a.Result)
	})
	if err != nil {
		return nil, fmt.Errorf("reading %d actions: %w", len(keys), err)
	}
	out := make(map[string]Action, len(list))
	for _, x := range list {
		out[x.k] = x.a
	}
	return out, nil
}

// SetActionResults stores the first results of keys.
func (s *Store) SetActionResults(ctx context.Context, q keelsql.Querier, keys, results []string) error {
	if _, err := q.Exec(ctx, s.q.Get("ActionResultMany"), keelsql.ArrayOf(keys), keelsql.ArrayOf(results)); err != nil {
		return fmt.Errorf("storing %d results: %w", len(keys), err)
	}
	return nil
}

// DeleteActions gives back claimed keys that have no result yet.
func (s *Store) DeleteActions(ctx context.Context, q keelsql.Querier, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if _, err := q.Exec(ctx, s.q.Get("ActionDeleteMany"), keelsql.ArrayOf(keys)); err != nil {
		return fmt.Errorf("giving back %d keys: %w", len(keys), err)
	}
	return nil
}

// PairRequests is one pair of a batch: the running totals of its
// requests' quantities, in arrival order.
type PairRequests struct {
	Warehouse, SKU string
	Cum            []int64
}

// Granted is a pair's balance after a batch and how many of its first
// requests got stock.
type Granted struct {
	Stock
	Granted int
}

// ReserveMany runs the coalesced statement over the pairs (each once);
// on PostgreSQL the statement first locks their rows in one order. A pair
// with no stock row is absent from the result.
func (s *Store) ReserveMany(ctx context.Context, q keelsql.Querier, pairs []PairRequests, now time.Time) (map[[2]string]Granted, error) {
	whs, skus := make([]string, len(pairs)), make([]string, len(pairs))
	var cum []int64
	lo, hi := make([]int64, len(pairs)), make([]int64, len(pairs))
	for i, p := range pairs {
		whs[i], skus[i] = p.Warehouse, p.SKU
		lo[i] = int64(len(cum)) + 1
		cum = append(cum, p.Cum...)
		hi[i] = int64(len(cum))
	}
	rows, err := q.Query(ctx, s.q.Get("StockReserveMany"), keelsql.ArrayOf(whs), keelsql.ArrayOf(skus), keelsql.ArrayOf(cum),
		keelsql.ArrayOf(lo), keelsql.ArrayOf(hi), now)
	got, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Granted, error) {
		g := Granted{Stock: Stock{UpdatedAt: now}}
		var n int64
		err := r.Scan(&g.Warehouse, &g.SKU, &g.OnHand, &g.Available, &g.Reserved, &g.Sold, &g.Returned, &g.Version, &n)
		g.Granted = int(n)
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("coalesced reservation of %d pairs: %w", len(pairs), err)
	}
	out := make(map[[2]string]Granted, len(got))
	for _, g := range got {
		out[[2]string{g.Warehouse, g.SKU}] = g
	}
	return out, nil
}

// InsertReservations writes reservations at version 1 and sets their ids;
// a granted one expires at expires, a failed one now.
func (s *Store) InsertReservations(ctx context.Context, q keelsql.Querier, rs []*Reservation, now, expires time.Time) error {
	if len(rs) == 0 {
		return nil
	}
	list := make([][6]any, len(rs))
	byLine := make(map[string]*Reservation, len(rs))
	for i, r := range rs {
		list[i] = [6]any{r.OrderLine, r.Warehouse, r.SKU, r.Qty, string(r.State), r.StockVersion}
		byLine[r.OrderLine] = r
	}
	arg, err := jsonArg(list)
	if err != nil {
		return err
	}
	rows, err := q.Query(ctx, s.q.Get("ReservationInsertMany"), arg, now, expires)
	type idLine struct {
		id   int64
		line string
	}
	got, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (idLine, error) {
		var x idLine
		return x, r.Scan(&x.id, &x.line)
	})
	if err != nil {
		return fmt.Errorf("writing %d reservations: %w", len(rs), err)
	}
	if len(got) != len(rs) {
		return fmt.Errorf("writing %d reservations: %d written", len(rs), len(got))
	}
	for _, x := range got {
		r := byLine[x.line]
		r.ID, r.Version, r.CreatedAt, r.UpdatedAt = x.id, 1, now, now
		if r.State == domain.Reserved {
			r.ExpiresAt = expires
		} else {
			r.ExpiresAt = now
		}
		r.CheckAfter = r.ExpiresAt
	}
	return nil
}

// InsertEntries books movements at one time and sets their ids; each
// intent is unique, as for InsertEntry.
func (s *Store) InsertEntries(ctx context.Context, q keelsql.Querier, es []*Entry, at time.Time) error {
	if len(es) == 0 {
		return nil
	}
	list := make([][14]any, len(es))
	byIntent := make(map[string]*Entry, len(es))
	for i, e := range es {
		var res any
		if e.ReservationID != 0 {
			res = e.ReservationID
		}
		d := e.Delta
		list[i] = [14]any{e.Intent, e.Warehouse, e.SKU, string(e.Movement), e.Qty, d.OnHand, d.Available, d.Reserved,
			d.Sold, d.Returned, e.StockVersion, res, e.Reason, e.Actor}
		byIntent[e.Intent] = e
		e.At = at
	}
	arg, err := jsonArg(list)
	if err != nil {
		return err
	}
	rows, err := q.Query(ctx, s.q.Get("LedgerInsertMany"), arg, at)
	type idIntent struct {
		id     int64
		intent string
	}
	got, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (idIntent, error) {
		var x idIntent
		return x, r.Scan(&x.id, &x.intent)
	})
	if err != nil {
		return fmt.Errorf("booking %d movements: %w", len(es), err)
	}
	if len(got) != len(es) {
		return fmt.Errorf("booking %d movements: %d written", len(es), len(got))
	}
	for _, x := range got {
		byIntent[x.intent].ID = x.id
	}
	return nil
}

// HistoryRow is one step to record for a reservation.
type HistoryRow struct {
	Reservation int64
	History
}

// InsertHistories records steps at one time.
func (s *Store) InsertHistories(ctx context.Context, q keelsql.Querier, hs []HistoryRow, at time.Time) error {
	if len(hs) == 0 {
		return nil
	}
	list := make([][8]any, len(hs))
	for i, h := range hs {
		var ledger any
		if h.LedgerID != 0 {
			ledger = h.LedgerID
		}
		list[i] = [8]any{h.Reservation, h.Version, string(h.From), string(h.To), h.Action, ledger, h.Detail, h.Actor}
	}
	arg, err := jsonArg(list)
	if err != nil {
		return err
	}
	if _, err := q.Exec(ctx, s.q.Get("HistoryInsertMany"), arg, at); err != nil {
		return fmt.Errorf("recording %d steps: %w", len(hs), err)
	}
	return nil
}

// InsertGranted writes a batch's reservations (setting their ids) and the
// ledger rows of the granted ones: entries[i] books for of[i], whose id
// it takes. On PostgreSQL one statement does both.
func (s *Store) InsertGranted(ctx context.Context, q keelsql.Querier, rs []*Reservation, entries []*Entry, of []*Reservation, now, expires time.Time) error {
	if !s.pg {
		if err := s.InsertReservations(ctx, q, rs, now, expires); err != nil {
			return err
		}
		for i, e := range entries {
			e.ReservationID = of[i].ID
		}
		return s.InsertEntries(ctx, q, entries, now)
	}
	if len(rs) == 0 {
		return nil
	}
	res := make([][6]any, len(rs))
	byLine := make(map[string]*Reservation, len(rs))
	for i, r := range rs {
		res[i] = [6]any{r.OrderLine, r.Warehouse, r.SKU, r.Qty, string(r.State), r.StockVersion}
		byLine[r.OrderLine] = r
	}
	led := make([][14]any, len(entries))
	entryOf := make(map[string]*Entry, len(entries))
	for i, e := range entries {
		d := e.Delta
		led[i] = [14]any{e.Intent, e.Warehouse, e.SKU, string(e.Movement), e.Qty, d.OnHand, d.Available, d.Reserved,
			d.Sold, d.Returned, e.StockVersion, of[i].OrderLine, e.Reason, e.Actor}
		entryOf[of[i].OrderLine] = e
		e.At = now
	}
	resArg, err := jsonArg(res)
	if err != nil {
		return err
	}
	ledArg, err := jsonArg(led)
	if err != nil {
		return err
	}
	rows, err := q.Query(ctx, s.q.Get("GrantedInsertMany"), resArg, now, expires, ledArg)
	type written struct {
		id     int64
		line   string
		ledger *int64
	}
	got, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (written, error) {
		var w written
		return w, r.Scan(&w.id, &w.line, &w.ledger)
	})
	if err != nil {
		return fmt.Errorf("writing %d reservations and %d movements: %w", len(rs), len(entries), err)
	}
	if len(got) != len(rs) {
		return fmt.Errorf("writing %d reservations: %d written", len(rs), len(got))
	}
	booked := 0
	for _, w := range got {
		r := byLine[w.line]
		r.ID, r.Version, r.CreatedAt, r.UpdatedAt = w.id, 1, now, now
		if r.State == domain.Reserved {
			r.ExpiresAt = expires
		} else {
			r.ExpiresAt = now
		}
		r.CheckAfter = r.ExpiresAt
		if e := entryOf[w.line]; e != nil && w.ledger != nil {
			e.ID, e.ReservationID = *w.ledger, w.id
			booked++
		}
	}
	if booked != len(entries) {
		return fmt.Errorf("booking %d movements: %d written", len(entries), booked)
	}
	return nil
}

// Finish records a batch's history and its keys' results; on PostgreSQL
// in one statement.
func (s *Store) Finish(ctx context.Context, q keelsql.Querier, hs []HistoryRow, keys, results []string, at time.Time) error {
	if !s.pg || len(hs) == 0 {
		if err := s.InsertHistories(ctx, q, hs, at); err != nil {
			return err
		}
		return s.SetActionResults(ctx, q, keys, results)
	}
	list := make([][8]any, len(hs))
	for i, h := range hs {
		var ledger any
		if h.LedgerID != 0 {
			ledger = h.LedgerID
		}
		list[i] = [8]any{h.Reservation, h.Version, string(h.From), string(h.To), h.Action, ledger, h.Detail, h.Actor}
	}
	arg, err := jsonArg(list)
	if err != nil {
		return err
	}
	if _, err := q.Exec(ctx, s.q.Get("FinishMany"), arg, at, keelsql.ArrayOf(keys), keelsql.ArrayOf(results)); err != nil {
		return fmt.Errorf("recording %d steps and results: %w", len(hs), err)
	}
	return nil
}

// Pick is a confirmed reservation's pick task.
type Pick struct {
	Reservation, Ledger int64
	Warehouse, SKU      string
	Qty                 int64
}

// InsertPicks writes pick tasks in one statement; a reservation's task
// already written is left as it is.
func (s *Store) InsertPicks(ctx context.Context, q keelsql.Querier, ps []Pick, at time.Time) error {
	if len(ps) == 0 {
		return nil
	}
	var err error
	if s.pg {
		n := len(ps)
		rs, ls, whs, skus, qs := make([]int64, n), make([]int64, n), make([]string, n), make([]string, n), make([]int64, n)
		for i, p := range ps {
			rs[i], ls[i], whs[i], skus[i], qs[i] = p.Reservation, p.Ledger, p.Warehouse, p.SKU, p.Qty
		}
		_, err = q.Exec(ctx, s.q.Get("PickInsertMany"), keelsql.ArrayOf(rs), keelsql.ArrayOf(ls), keelsql.ArrayOf(whs),
			keelsql.ArrayOf(skus), keelsql.ArrayOf(qs), at)
	} else {
		list := make([][5]any, len(ps))
		for i, p := range ps {
			list[i] = [5]any{p.Reservation, p.Ledger, p.Warehouse, p.SKU, p.Qty}
		}
		var arg string
		if arg, err = jsonArg(list); err == nil {
			_, err = q.Exec(ctx, s.q.Get("PickInsertMany"), arg, at)
		}
	}
	if err != nil {
		return fmt.Errorf("writing %d pick tasks: %w", len(ps), err)
	}
	return nil
}
