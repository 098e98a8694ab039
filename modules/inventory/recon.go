package inventory

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/modules/inventory/domain"
)

// The reconcilers' names.
const (
	ReconBalance    = "inventory.balance"
	ReconEndState   = "inventory.reservations"
	ReconShipments  = "inventory.shipments"
	ReconProjection = "inventory.projection"
	ReconCount      = "inventory.count"
)

// reconciler is one of the module's checks.
type reconciler[TTx any] struct {
	m       *Module[TTx]
	name    string
	every   time.Duration
	run     func(ctx context.Context, in keelrecon.RunInput) (keelrecon.RunOutput, error)
	execute func(ctx context.Context, tx keelsql.Tx[TTx], d *keelrecon.DiscrepancyRow, actionID string) error
}

func (r *reconciler[TTx]) Name() string            { return r.name }
func (r *reconciler[TTx]) RuleVersion() string     { return "1" }
func (r *reconciler[TTx]) Schedule() keel.Schedule { return keel.Every(r.every) }
func (r *reconciler[TTx]) Run(ctx context.Context, in keelrecon.RunInput) (keelrecon.RunOutput, error) {
	return r.run(ctx, in)
}
func (r *reconciler[TTx]) Execute(ctx context.Context, tx keelsql.Tx[TTx], d *keelrecon.DiscrepancyRow, actionID string) error {
	if r.execute == nil {
		return fmt.Errorf("%w: %s has no automatic fix: investigate the evidence and book an adjustment", ErrState, r.name)
	}
	return r.execute(ctx, tx, d, actionID)
}

// registerReconcilers registers the module's checks with the host's Recon.
func (m *Module[TTx]) registerReconcilers() error {
	if m.recon == nil {
		return nil
	}
	for _, r := range []*reconciler[TTx]{
		{m: m, name: ReconBalance, every: time.Hour, run: m.reconBalance},
		{m: m, name: ReconEndState, every: time.Hour, run: m.reconEndState},
		{m: m, name: ReconShipments, every: time.Hour, run: m.reconShipments},
		{m: m, name: ReconProjection, every: 10 * time.Minute, run: m.reconProjection},
		{m: m, name: ReconCount, every: time.Hour, run: m.reconCount, execute: m.executeCount},
	} {
		if err := m.recon.Register(r); err != nil {
			return err
		}
	}
	return nil
}

func evidence(kv ...any) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for i := 0; i+1 < len(kv); i += 2 {
		b, _ := json.Marshal(kv[i+1])
		out[kv[i].(string)] = b
	}
	return out
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// reconBalance: per (warehouse, SKU), the balance against what the ledger
// derives. Each pair is its own discrepancy: differences that cancel
// across SKUs are not netted.
func (m *Module[TTx]) reconBalance(ctx context.Context, in keelrecon.RunInput) (keelrecon.RunOutput, error) {
	var out keelrecon.RunOutput
	rows, err := m.db.Query(ctx, m.st.SQL("BalanceVsLedger"))
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var wh, sku, cur string
		var b, d domain.Balance
		var v, dv, n, unit int64
		if err := rows.Scan(&wh, &sku, &b.OnHand, &b.Available, &b.Reserved, &b.Sold, &b.Returned, &v,
			&d.OnHand, &d.Available, &d.Reserved, &d.Sold, &d.Returned, &dv, &n, &unit, &cur); err != nil {
			return out, err
		}
		out.Compared++
		if b == d && v == dv && n == v {
			continue
		}
		diff := b.OnHand - d.OnHand
		if diff == 0 {
			diff = b.Available - d.Available
		}
		out.Discrepancies = append(out.Discrepancies, keelrecon.Discrepancy{Class: keelrecon.AmountMismatch,
			Key: StockKey(wh, sku), Evidence: evidence("balance", map[string]any{"balance": b, "version": v},
				"ledger", map[string]any{"derived": d, "max_version": dv, "rows": n}),
			SuggestedAction: "核查余额与库存流水：余额不得无流水变动 / check the balance against its ledger",
			Impact:          abs(diff) * unit, Currency: currencyIf(abs(diff)*unit, cur), NeedsApproval: true})
	}
	return out, rows.Err()
}

func currencyIf(impact int64, cur string) string {
	if impact == 0 {
		return ""
	}
	return cur
}

// reconEndState: every order line's reservation has an end state its
// ledger rows explain.
func (m *Module[TTx]) reconEndState(ctx context.Context, in keelrecon.RunInput) (keelrecon.RunOutput, error) {
	var out keelrecon.RunOutput
	rows, err := m.db.Query(ctx, m.st.SQL("ReservationLedgerShape"), in.Cutoff)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, qty, nres, nconf, nrel, nret int64
		var line, st string
		if err := rows.Scan(&id, &line, &st, &qty, &nres, &nconf, &nrel, &nret); err != nil {
			return out, err
		}
		out.Compared++
		want := map[domain.State][4]int64{domain.Failed: {0, 0, 0, 0}, domain.Reserved: {1, 0, 0, 0},
			domain.Confirmed: {1, 1, 0, 0}, domain.Released: {1, 0, 1, 0}, domain.Returning: {1, 1, 0, 0},
			domain.Returned: {1, 1, 0, 1}}
		w, known := want[domain.State(st)]
		got := [4]int64{nres, nconf, nrel, nret}
		if known && w == got {
			continue
		}
		out.Discrepancies = append(out.Discrepancies, keelrecon.Discrepancy{Class: keelrecon.StatusMismatch,
			Key: "reservation:" + strconv.FormatInt(id, 10),
			Evidence: evidence("reservation", map[string]any{"id": id, "order_line": line, "state": st, "qty": qty},
				"ledger", map[string]any{"reserve": nres, "confirm": nconf, "release": nrel, "return": nret}),
			SuggestedAction: "核查预占单终态与流水 / explain the reservation's end state", NeedsApproval: true})
	}
	return out, rows.Err()
}

// reconShipments: confirmed reservations against the warehouse's shipment
// receipts (its own list, over HTTP).
func (m *Module[TTx]) reconShipments(ctx context.Context, in keelrecon.RunInput) (keelrecon.RunOutput, error) {
	var out keelrecon.RunOutput
	var receipts []struct {
		ReservationID int64  `json:"reservation_id"`
		Receipt       string `json:"receipt"`
		Qty           int64  `json:"qty"`
	}
	if m.warehouseURL() == "" {
		return out, errors.New("no warehouse to reconcile shipments with (inventory.warehouse_url)")
	}
	if err := get(ctx, m.warehouse, m.warehouseURL()+"/receipts", &receipts); err != nil {
		return out, fmt.Errorf("reading the warehouse's receipts: %w", err)
	}
	theirs := map[int64]int64{}
	for _, r := range receipts {
		theirs[r.ReservationID] = r.Qty
	}
	ours := map[int64]bool{}
	err := m.eachConfirmed(ctx, in.Cutoff, func(c confirmed) {
		out.Compared++
		ours[c.id] = true
		key := "reservation:" + strconv.FormatInt(c.id, 10)
		tq, ok := theirs[c.id]
		switch {
		case !ok:
			out.Discrepancies = append(out.Discrepancies, keelrecon.Discrepancy{Class: keelrecon.MissingTheirs, Key: key,
				Evidence:        evidence("ours", map[string]any{"reservation": c.id, "warehouse": c.warehouse, "sku": c.sku, "qty": c.qty}, "warehouse", map[string]any{"receipt": nil}),
				SuggestedAction: "向仓库核实出库回执 / ask the warehouse for the shipment receipt", NeedsApproval: true})
		case tq != c.qty:
			out.Discrepancies = append(out.Discrepancies, keelrecon.Discrepancy{Class: keelrecon.AmountMismatch, Key: key,
				Evidence:        evidence("ours", map[string]any{"reservation": c.id, "qty": c.qty}, "warehouse", map[string]any{"qty": tq}),
				SuggestedAction: "核对出库数量 / check the shipped quantity", NeedsApproval: true})
		}
	})
	if err != nil {
		return out, err
	}
	// The warehouse's receipts carry no time, so they are not cut off: a
	// receipt of a reservation confirmed here after the cutoff belongs to a
	// later run's window, not to "shipped but not confirmed". A scheduled
	// run whose cutoff was its tick reported every confirmation made since
	// as missing here.
	later := map[int64]bool{}
	if err := m.eachConfirmed(ctx, time.Now(), func(c confirmed) { later[c.id] = true }); err != nil {
		return out, err
	}
	for _, r := range receipts {
		if !ours[r.ReservationID] && !later[r.ReservationID] {
			out.Compared++
			out.Discrepancies = append(out.Discrepancies, keelrecon.Discrepancy{Class: keelrecon.MissingOurs,
				Key:             "reservation:" + strconv.FormatInt(r.ReservationID, 10),
				Evidence:        evidence("ours", map[string]any{"reservation": nil}, "warehouse", r),
				SuggestedAction: "仓库已出库但未确认：开冲突核验 / shipped but not confirmed here", NeedsApproval: true})
		}
	}
	return out, nil
}

// confirmed is one reservation confirmed (or returning, returned) here.
type confirmed struct {
	id, qty        int64
	warehouse, sku string
}

// eachConfirmed calls fn for every reservation confirmed here by at.
func (m *Module[TTx]) eachConfirmed(ctx context.Context, at time.Time, fn func(confirmed)) error {
	rows, err := m.db.Query(ctx, m.st.SQL("ConfirmedList"), at)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var c confirmed
		if err := rows.Scan(&c.id, &c.warehouse, &c.sku, &c.qty); err != nil {
			return err
		}
		fn(c)
	}
	return rows.Err()
}

// reconProjection: the search projection's version lag per pair.
func (m *Module[TTx]) reconProjection(ctx context.Context, in keelrecon.RunInput) (keelrecon.RunOutput, error) {
	var out keelrecon.RunOutput
	n, err := m.st.Count(ctx, m.db, "StockCount")
	if err != nil {
		return out, err
	}
	out.Compared = n
	rows, err := m.db.Query(ctx, m.st.SQL("SearchLag"))
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var wh, sku string
		var v, pv int64
		if err := rows.Scan(&wh, &sku, &v, &pv); err != nil {
			return out, err
		}
		out.Discrepancies = append(out.Discrepancies, keelrecon.Discrepancy{Class: keelrecon.Other, Key: StockKey(wh, sku),
			Evidence:        evidence("stock", map[string]any{"version": v}, "projection", map[string]any{"version": pv, "lag": v - pv}),
			SuggestedAction: "等待投影追上或重放事件 / let the projection catch up or replay"})
	}
	return out, rows.Err()
}

// reconCount: the latest physical count per pair against the books; the
// fix is an adjustment entry to the counted quantity.
func (m *Module[TTx]) reconCount(ctx context.Context, in keelrecon.RunInput) (keelrecon.RunOutput, error) {
	var out keelrecon.RunOutput
	rows, err := m.db.Query(ctx, m.st.SQL("CountLatest"), in.Cutoff)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, wh, sku, cur string
		var counted, onHand, unit int64
		if err := rows.Scan(&id, &wh, &sku, &counted, &onHand, &unit, &cur); err != nil {
			return out, err
		}
		out.Compared++
		if counted == onHand {
			continue
		}
		diff := counted - onHand
		out.Discrepancies = append(out.Discrepancies, keelrecon.Discrepancy{Class: keelrecon.AmountMismatch,
			Key:             StockKey(wh, sku),
			Evidence:        evidence("books", map[string]any{"on_hand": onHand}, "count", map[string]any{"count": id, "counted": counted, "diff": diff}),
			SuggestedAction: fmt.Sprintf("按盘点调整 %+d / adjust by %+d to the count", diff, diff),
			Impact:          abs(diff) * unit, Currency: currencyIf(abs(diff)*unit, cur)})
	}
	return out, rows.Err()
}

// executeCount books the count's difference as an adjustment entry, in
// the transaction that marks the discrepancy executed; the next run
// verifies it.
func (m *Module[TTx]) executeCount(ctx context.Context, tx keelsql.Tx[TTx], d *keelrecon.DiscrepancyRow, actionID string) error {
	var ev struct {
		Diff  int64  `json:"diff"`
		Count string `json:"count"`
	}
	if err := json.Unmarshal(d.Evidence["count"], &ev); err != nil {
		return fmt.Errorf("reading the count's evidence: %w", err)
	}
	wh, sku := splitKey(d.Key)
	a := AdjustRequest{Key: strings.NewReplacer("/", "-").Replace(actionID), Warehouse: wh, SKU: sku, Delta: ev.Diff,
		Reason: "盘点 " + ev.Count + " (reconciliation " + actionID + ")"}
	if err := a.check(); err != nil {
		return err
	}
	// Approval, where needed, was the discrepancy's: book it directly.
	out, err := m.adjustNoApproval(ctx, tx, a)
	if err != nil {
		return err
	}
	if out.Adjustment.State != "applied" {
		return fmt.Errorf("%w: adjustment %d is %s", ErrState, out.Adjustment.ID, out.Adjustment.State)
	}
	return nil
}

// ImportCount reads a physical count sheet: CSV with a header
// "warehouse,sku,counted" and one line per pair. The count id makes the
// import idempotent; a bad line refuses the whole sheet.
func (m *Module[TTx]) ImportCount(ctx context.Context, countID string, r io.Reader) (int, error) {
	if err := domain.CheckID("count", countID); err != nil {
		return 0, err
	}
	cr := csv.NewReader(io.LimitReader(r, 16<<20))
	cr.FieldsPerRecord = 3
	head, err := cr.Read()
	if err != nil || strings.Join(head, ",") != "warehouse,sku,counted" {
		return 0, fmt.Errorf("%w: the count sheet must start with the header warehouse,sku,counted", errInvalid)
	}
	type line struct {
		wh, sku string
		n       int64
	}
	var lines []line
	for i := 2; ; i++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("%w: count sheet line %d: %v", errInvalid, i, err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(rec[2]), 10, 64)
		if err != nil || n < 0 || n > domain.MaxQty*100 {
			return 0, fmt.Errorf("%w: count sheet line %d: counted %q is not a quantity", errInvalid, i, rec[2])
		}
		wh, sku := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1])
		if err := errors.Join(domain.CheckID("warehouse", wh), domain.CheckID("sku", sku)); err != nil {
			return 0, fmt.Errorf("count sheet line %d: %w", i, err)
		}
		lines = append(lines, line{wh, sku, n})
	}
	err = m.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		for _, l := range lines {
			if err := m.knownPair(ctx, tx, l.wh, l.sku); err != nil {
				return err
			}
			if _, err := m.st.Exec(ctx, tx, "CountInsert", countID, l.wh, l.sku, l.n, m.now(), actorOf(ctx)); err != nil {
				return err
			}
		}
		return nil
	})
	return len(lines), err
}
