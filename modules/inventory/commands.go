package inventory

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/keelwork/keel/module/modcli"
	"github.com/keelwork/keel/modules/inventory/domain"
)

// The module's verbs under `keel inventory`: they act through a running
// server's API (the module's routes), print states and movements in the
// module's words (Chinese, then English) and check what they can before
// sending anything.

// Commands are the module's verbs.
func Commands(run modcli.Runner) []*cobra.Command {
	return []*cobra.Command{modcli.Group("inventory",
		"Stock, reservations, conflicts and admission of the inventory module (through --server)",
		stockCmd(run), reservationCmd(run), conflictsCmd(run), admissionCmd(run))}
}

// verb runs work through run with the command's arguments.
func verb(run modcli.Runner, work func(ctx context.Context, e *modcli.Env, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return run(cmd, func(ctx context.Context, e *modcli.Env) error { return work(ctx, e, args) })
	}
}

// word is a state's or movement's words, "已预占 (reserved)", or the value
// itself for one this binary does not know (a newer server).
func word(s string) string {
	if w, ok := domain.Words[s]; ok {
		return w[0] + " (" + w[1] + ")"
	}
	return s
}

func stockCmd(run modcli.Runner) *cobra.Command {
	var wh, after string
	var limit int
	cmd := &cobra.Command{Use: "stock", Short: "Balances by warehouse and SKU (the shown value is not a promise)", Args: cobra.NoArgs,
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, _ []string) error {
			q := url.Values{}
			if wh != "" {
				if err := domain.CheckID("warehouse", wh); err != nil {
					return fmt.Errorf("--warehouse: %v", err)
				}
				q.Set("warehouse", wh)
			}
			modcli.PageQuery(q, limit, after)
			var page modcli.Page[StockRow]
			raw, err := e.API.Call(ctx, "GET", apiRoot+"/stock?"+q.Encode(), nil, &page)
			if err != nil || e.Printed(raw) {
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
			modcli.Table(e.Out, "WAREHOUSE\tSKU\tON HAND\tAVAILABLE\tRESERVED\tSOLD\tVERSION\tSHOWN (NOT A PROMISE)", rows)
			e.AfterHint(page.NextCursor)
			return nil
		})}
	cmd.Flags().StringVar(&wh, "warehouse", "", "only this warehouse")
	cmd.Flags().IntVar(&limit, "limit", 50, "page size (1..1000)")
	cmd.Flags().StringVar(&after, "after", "", "continue after a previous page (the cursor it printed)")
	return cmd
}

func reservationCmd(run modcli.Runner) *cobra.Command {
	return &cobra.Command{Use: "reservation ID", Short: "A reservation with its history and ledger rows", Args: cobra.ExactArgs(1),
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, args []string) error {
			id := args[0]
			if err := modcli.PositiveID("reservation", id); err != nil {
				return err
			}
			var d ReservationDetail
			raw, err := e.API.Call(ctx, "GET", apiRoot+"/reservations/"+id, nil, &d)
			if err != nil {
				return modcli.NotFound("reservation", id, err)
			}
			if e.Printed(raw) {
				return nil
			}
			r := d.Reservation
			fmt.Fprintf(e.Out, "reservation %d  order line %s  %s/%s  qty %d  %s  version %d\n", r.ID, r.OrderLine, r.Warehouse,
				r.SKU, r.Qty, word(string(r.State)), r.Version)
			var rows [][]string
			for _, h := range d.History {
				rows = append(rows, []string{strconv.FormatInt(h.Version, 10), word(string(h.From)), word(string(h.To)), h.Detail,
					h.Actor, modcli.TS(h.At)})
			}
			modcli.Table(e.Out, "VERSION\tFROM\tTO\tDETAIL\tACTOR\tAT", rows)
			rows = nil
			for _, l := range d.Ledger {
				rows = append(rows, []string{strconv.FormatInt(l.ID, 10), word(string(l.Movement)), strconv.FormatInt(l.Qty, 10),
					strconv.FormatInt(l.StockVersion, 10), l.Reason})
			}
			modcli.Table(e.Out, "LEDGER\tMOVEMENT\tQTY\tSTOCK VERSION\tREASON", rows)
			return nil
		})}
}

func conflictsCmd(run modcli.Runner) *cobra.Command {
	var state string
	cmd := &cobra.Command{Use: "conflicts", Short: "Conflict tickets (冲突核验)", Args: cobra.NoArgs,
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, _ []string) error {
			q := url.Values{}
			switch state {
			case "", "open", "awaiting_approval", "resolved":
				if state != "" {
					q.Set("state", state)
				}
			default:
				return fmt.Errorf("--state must be open, awaiting_approval or resolved, got %q", state)
			}
			var page modcli.Page[ConflictView]
			raw, err := e.API.Call(ctx, "GET", apiRoot+"/conflicts?"+q.Encode(), nil, &page)
			if err != nil || e.Printed(raw) {
				return err
			}
			var rows [][]string
			for _, x := range page.Data {
				rows = append(rows, []string{strconv.FormatInt(x.ID, 10), x.Kind, x.Warehouse + "/" + x.SKU,
					strconv.FormatInt(x.ReservationID, 10), x.State})
			}
			modcli.Table(e.Out, "ID\tKIND\tSTOCK\tRESERVATION\tSTATE", rows)
			e.AfterHint(page.NextCursor)
			return nil
		})}
	cmd.Flags().StringVar(&state, "state", "", "open, awaiting_approval or resolved")
	return cmd
}

func admissionCmd(run modcli.Runner) *cobra.Command {
	var busy, reason string
	cmd := &cobra.Command{Use: "admission", Short: "The admission watermark; --busy on|off --reason R switches it by hand (audited)", Args: cobra.NoArgs,
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, _ []string) error {
			var raw []byte
			var err error
			var st struct {
				Admission AdmissionState `json:"admission"`
			}
			switch busy {
			case "":
				raw, err = e.API.Call(ctx, "GET", apiRoot+"/admission", nil, &st)
			case "on", "off":
				// The switch is audited with its reason; the server checks
				// the reason by the one text rule and says what is wrong.
				raw, err = e.API.Call(ctx, "POST", apiRoot+"/admission", map[string]any{"busy": busy == "on", "reason": reason}, &st.Admission)
			default:
				return fmt.Errorf("--busy must be on or off, got %q", busy)
			}
			if err != nil || e.Printed(raw) {
				return err
			}
			a := st.Admission
			state := "accepting"
			if a.Over {
				state = "BUSY: new reservations get 429"
			}
			fmt.Fprintf(e.Out, "%s (latency %s of %s, pool wait %s of %s, refused %d, switched by hand: %v)\n", state,
				a.Latency, a.LatencyMax, a.PoolWait, a.PoolWaitMax, a.Refused, a.Forced)
			return nil
		})}
	cmd.Flags().StringVar(&busy, "busy", "", "on or off")
	cmd.Flags().StringVar(&reason, "reason", "", "why the switch is thrown (audited; at least 5 visible characters)")
	return cmd
}
