package cli

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"github.com/keelwork/keel/modules/inventory"
	"github.com/keelwork/keel/modules/inventory/domain"
	"github.com/keelwork/keel/server/api"
)

// InventoryPrefix is where the inventory module's API lives.
const InventoryPrefix = "/api/v1/inventory"

func inventoryWord(s string) string {
	if w, ok := domain.Words[s]; ok {
		return w[0] + " (" + w[1] + ")"
	}
	return s
}

// InventoryStock prints balances by warehouse and SKU, with the search
// projection's value marked as display only.
func InventoryStock(ctx context.Context, c *APIClient, o *AdminOpts, warehouse string, limit int, after string) error {
	q := url.Values{}
	if warehouse != "" {
		if err := domain.CheckID("warehouse", warehouse); err != nil {
			return fmt.Errorf("--warehouse: %v", err)
		}
		q.Set("warehouse", warehouse)
	}
	pageQuery(q, limit, after)
	var page api.Page[inventory.StockRow]
	raw, err := c.Call(ctx, "GET", InventoryPrefix+"/stock?"+q.Encode(), nil, &page)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, r := range page.Data {
		cached := "-"
		if r.Cached >= 0 {
			cached = fmt.Sprintf("%d@v%d", r.Cached, r.CachedVersion)
		}
		rows = append(rows, []string{r.Warehouse, r.SKU, strconv.FormatInt(r.OnHand, 10), strconv.FormatInt(r.Available, 10),
			strconv.FormatInt(r.Reserved, 10), strconv.FormatInt(r.Sold, 10), strconv.FormatInt(r.Version, 10), cached})
	}
	table(o.Out, "WAREHOUSE\tSKU\tON HAND\tAVAILABLE\tRESERVED\tSOLD\tVERSION\tSHOWN (NOT A PROMISE)", rows)
	if page.NextCursor != "" {
		fmt.Fprintf(o.Out, "more: --after %s\n", page.NextCursor)
	}
	return nil
}

// InventoryReservation prints a reservation with its history and ledger.
func InventoryReservation(ctx context.Context, c *APIClient, o *AdminOpts, id string) error {
	if _, err := positiveID("reservation", id); err != nil {
		return err
	}
	var d inventory.ReservationDetail
	raw, err := c.Call(ctx, "GET", InventoryPrefix+"/reservations/"+id, nil, &d)
	if err != nil {
		return notFound("reservation", id, err)
	}
	if printed(o, raw) {
		return nil
	}
	r := d.Reservation
	fmt.Fprintf(o.Out, "reservation %d  order line %s  %s/%s  qty %d  %s  version %d\n", r.ID, r.OrderLine, r.Warehouse,
		r.SKU, r.Qty, inventoryWord(string(r.State)), r.Version)
	var rows [][]string
	for _, h := range d.History {
		rows = append(rows, []string{strconv.FormatInt(h.Version, 10), inventoryWord(string(h.From)), inventoryWord(string(h.To)), h.Detail, h.Actor, ts(h.At)})
	}
	table(o.Out, "VERSION\tFROM\tTO\tDETAIL\tACTOR\tAT", rows)
	rows = nil
	for _, e := range d.Ledger {
		rows = append(rows, []string{strconv.FormatInt(e.ID, 10), inventoryWord(string(e.Movement)), strconv.FormatInt(e.Qty, 10),
			strconv.FormatInt(e.StockVersion, 10), e.Reason})
	}
	table(o.Out, "LEDGER\tMOVEMENT\tQTY\tSTOCK VERSION\tREASON", rows)
	return nil
}

// InventoryConflicts prints the conflict tickets.
func InventoryConflicts(ctx context.Context, c *APIClient, o *AdminOpts, state string) error {
	q := url.Values{}
	switch state {
	case "", "open", "awaiting_approval", "resolved":
		if state != "" {
			q.Set("state", state)
		}
	default:
		return fmt.Errorf("--state must be open, awaiting_approval or resolved, got %q", state)
	}
	var page api.Page[inventory.ConflictView]
	raw, err := c.Call(ctx, "GET", InventoryPrefix+"/conflicts?"+q.Encode(), nil, &page)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, x := range page.Data {
		rows = append(rows, []string{strconv.FormatInt(x.ID, 10), x.Kind, x.Warehouse + "/" + x.SKU,
			strconv.FormatInt(x.ReservationID, 10), x.State})
	}
	table(o.Out, "ID\tKIND\tSTOCK\tRESERVATION\tSTATE", rows)
	return nil
}

// InventoryAdmission prints (and with busy set, switches) the watermark.
func InventoryAdmission(ctx context.Context, c *APIClient, o *AdminOpts, busy string) error {
	var raw []byte
	var err error
	var st struct {
		Admission inventory.AdmissionState `json:"admission"`
	}
	switch busy {
	case "":
		raw, err = c.Call(ctx, "GET", InventoryPrefix+"/admission", nil, &st)
	case "on", "off":
		raw, err = c.Call(ctx, "POST", InventoryPrefix+"/admission", map[string]bool{"busy": busy == "on"}, &st.Admission)
	default:
		return fmt.Errorf("--busy must be on or off, got %q", busy)
	}
	if err != nil || printed(o, raw) {
		return err
	}
	a := st.Admission
	state := "accepting"
	if a.Over {
		state = "BUSY: new reservations get 429"
	}
	fmt.Fprintf(o.Out, "%s (latency %s of %s, pool wait %s of %s, refused %d, switched by hand: %v)\n", state,
		a.Latency, a.LatencyMax, a.PoolWait, a.PoolWaitMax, a.Refused, a.Forced)
	return nil
}
