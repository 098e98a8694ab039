package payment

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelwork/keel/module/modcli"
)

// The module's verbs under `keel payments`, through a running server's API.
// Reconciliation runs, discrepancies and approvals are `keel recon` and
// `keel approvals`.

// Commands are the module's verbs.
func Commands(run modcli.Runner) []*cobra.Command {
	return []*cobra.Command{modcli.Group("payments",
		"List and act on payments, refunds and channel bills (through --server)",
		payListCmd(run), payGetCmd(run), payQueryCmd(run), refundCmd(run), refundsCmd(run), billCmd(run), healthCmd(run))}
}

func verb(run modcli.Runner, work func(ctx context.Context, e *modcli.Env, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return run(cmd, func(ctx context.Context, e *modcli.Env) error { return work(ctx, e, args) })
	}
}

func checkNo(what, no string) error {
	if !numberRE40.MatchString(no) {
		return fmt.Errorf("%s %q is not a number Keel issues (6 to 40 letters, digits, - or _)", what, no)
	}
	return nil
}

func oneOf(what, v string, allowed []string) error {
	if v == "" {
		return nil
	}
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("unknown %s %q (one of %v)", what, v, allowed)
}

func payListCmd(run modcli.Runner) *cobra.Command {
	var state, after string
	var limit int
	cmd := &cobra.Command{Use: "list", Short: "List payments, newest number first", Args: cobra.NoArgs,
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, _ []string) error {
			if err := oneOf("payment state", state, payStates); err != nil {
				return err
			}
			q := url.Values{}
			if state != "" {
				q.Set("state", state)
			}
			modcli.PageQuery(q, limit, after)
			var page modcli.Page[*Payment]
			raw, err := e.API.Call(ctx, "GET", APIPrefix+"/payments?"+q.Encode(), nil, &page)
			if err != nil || e.Printed(raw) {
				return err
			}
			var rows [][]string
			for _, p := range page.Data {
				rows = append(rows, []string{p.PaymentNo, p.OrderID, p.Channel, Money(p.AmountMinor, p.Currency),
					StateWord(p.State, "en"), Money(p.RefundedMinor, p.Currency), modcli.TS(p.CreatedAt)})
			}
			modcli.Table(e.Out, "PAYMENT\tORDER\tCHANNEL\tAMOUNT\tSTATE\tREFUNDED\tCREATED", rows)
			e.AfterHint(page.NextCursor)
			return nil
		})}
	cmd.Flags().StringVar(&state, "state", "", "pending, paid, closed or manual")
	cmd.Flags().IntVar(&limit, "limit", 50, "page size")
	cmd.Flags().StringVar(&after, "after", "", "continue after a previous page (the cursor it printed)")
	return cmd
}

func payGetCmd(run modcli.Runner) *cobra.Command {
	return &cobra.Command{Use: "get PAYMENT", Short: "Show a payment with its history, callback evidence, refunds and entries", Args: cobra.ExactArgs(1),
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, args []string) error {
			if err := checkNo("payment", args[0]); err != nil {
				return err
			}
			var d PaymentDetail
			raw, err := e.API.Call(ctx, "GET", APIPrefix+"/payments/"+args[0], nil, &d)
			if err != nil || e.Printed(raw) {
				return modcli.NotFound("payment", args[0], err)
			}
			p := d.Payment
			modcli.Fields(e.Out, [][]string{{"Payment", p.PaymentNo}, {"Order", p.OrderID}, {"Channel", p.Channel + " " + p.MerchantID},
				{"Amount", Money(p.AmountMinor, p.Currency)}, {"State", StateWord(p.State, "en")}, {"Transaction", p.TransactionID},
				{"Refunded", Money(p.RefundedMinor, p.Currency) + " of " + Money(p.RefundReserved, p.Currency) + " reserved"},
				{"Paid", modcli.OptTS(p.PaidAt)}})
			var rows [][]string
			for _, h := range d.History {
				rows = append(rows, []string{strconv.FormatInt(h.Version, 10), StateWord(h.From, "en"), StateWord(h.To, "en"), h.Reason, h.Actor, modcli.TS(h.At)})
			}
			fmt.Fprintln(e.Out)
			modcli.Table(e.Out, "#\tFROM\tTO\tREASON\tACTOR\tAT", rows)
			rows = nil
			for _, c := range d.Callbacks {
				rows = append(rows, []string{modcli.TS(c.ReceivedAt), pick(outcomeWords, c.Outcome, "en"), c.TransactionID, Money(c.AmountMinor, c.Currency), modcli.Short(c.Digest, 16)})
			}
			fmt.Fprintln(e.Out)
			modcli.Table(e.Out, "RECEIVED\tOUTCOME\tTRANSACTION\tAMOUNT\tSHA-256", rows)
			rows = nil
			for _, r := range d.Refunds {
				rows = append(rows, []string{r.RefundNo, Money(r.AmountMinor, r.Currency), refundWord(r.State, "en"), strconv.Itoa(r.Calls)})
			}
			fmt.Fprintln(e.Out)
			modcli.Table(e.Out, "REFUND\tAMOUNT\tSTATE\tCALLS", rows)
			return nil
		})}
}

func payQueryCmd(run modcli.Runner) *cobra.Command {
	return &cobra.Command{Use: "query PAYMENT", Short: "Ask the channel about a pending payment now", Args: cobra.ExactArgs(1),
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, args []string) error {
			if err := checkNo("payment", args[0]); err != nil {
				return err
			}
			var out struct{ State string }
			raw, err := e.API.Call(ctx, "POST", APIPrefix+"/payments/"+args[0]+"/query", nil, &out)
			if err != nil || e.Printed(raw) {
				return modcli.NotFound("payment", args[0], err)
			}
			fmt.Fprintf(e.Out, "%s is %s\n", args[0], StateWord(out.State, "en"))
			return nil
		})}
}

func refundCmd(run modcli.Runner) *cobra.Command {
	var amount, reason, request string
	cmd := &cobra.Command{Use: "refund PAYMENT --amount 12.34 --request ID", Short: "Refund part or all of a payment (the same --request finds the same refund)",
		Args: cobra.ExactArgs(1),
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, args []string) error {
			if err := checkNo("payment", args[0]); err != nil {
				return err
			}
			minor, ok := parseYuan(amount)
			if !ok {
				return fmt.Errorf("--amount %q must be a positive amount with at most two decimals", amount)
			}
			if !requestRE.MatchString(request) {
				return fmt.Errorf("--request is required: the refund's idempotency key, 1 to 64 letters, digits or _.:- (reuse it to retry)")
			}
			var r Refund
			raw, err := e.API.Call(ctx, "POST", APIPrefix+"/payments/"+args[0]+"/refunds",
				RefundRequest{RequestID: request, AmountMinor: minor, Reason: reason}, &r)
			if err != nil || e.Printed(raw) {
				return modcli.NotFound("payment", args[0], err)
			}
			fmt.Fprintf(e.Out, "refund %s of %s: %s\n", r.RefundNo, Money(r.AmountMinor, r.Currency), refundWord(r.State, "en"))
			return nil
		})}
	cmd.Flags().StringVar(&amount, "amount", "", "amount to refund, e.g. 12.34")
	cmd.Flags().StringVar(&reason, "reason", "", "why (shown to the buyer by some channels)")
	cmd.Flags().StringVar(&request, "request", "", "idempotency key of this refund request")
	return cmd
}

func refundsCmd(run modcli.Runner) *cobra.Command {
	var state, payment, after string
	var limit int
	cmd := &cobra.Command{Use: "refunds", Short: "List refunds (--state unknown or manual for the queues)", Args: cobra.NoArgs,
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, _ []string) error {
			if err := oneOf("refund state", state, refundStates); err != nil {
				return err
			}
			q := url.Values{}
			if state != "" {
				q.Set("state", state)
			}
			if payment != "" {
				if err := checkNo("payment", payment); err != nil {
					return err
				}
				q.Set("payment", payment)
			}
			modcli.PageQuery(q, limit, after)
			var page modcli.Page[*Refund]
			raw, err := e.API.Call(ctx, "GET", APIPrefix+"/refunds?"+q.Encode(), nil, &page)
			if err != nil || e.Printed(raw) {
				return err
			}
			var rows [][]string
			for _, r := range page.Data {
				rows = append(rows, []string{r.RefundNo, r.PaymentNo, Money(r.AmountMinor, r.Currency), refundWord(r.State, "en"),
					fmt.Sprintf("%d/%d", r.Calls, r.Queries), modcli.TS(r.UpdatedAt)})
			}
			modcli.Table(e.Out, "REFUND\tPAYMENT\tAMOUNT\tSTATE\tCALLS/QUERIES\tUPDATED", rows)
			e.AfterHint(page.NextCursor)
			return nil
		})}
	cmd.Flags().StringVar(&state, "state", "", "processing, refunded, unknown, manual or failed")
	cmd.Flags().StringVar(&payment, "payment", "", "only this payment's refunds")
	cmd.Flags().IntVar(&limit, "limit", 50, "page size")
	cmd.Flags().StringVar(&after, "after", "", "continue after a previous page")
	return cmd
}

func billCmd(run modcli.Runner) *cobra.Command {
	return &cobra.Command{Use: "bill CHANNEL DAY", Short: "Download a channel's bill of a day (YYYY-MM-DD) for reconciliation", Args: cobra.ExactArgs(2),
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, args []string) error {
			if args[0] != "wechat" && args[0] != "alipay" {
				return fmt.Errorf("unknown channel %q (wechat or alipay)", args[0])
			}
			if _, err := time.Parse(time.DateOnly, args[1]); err != nil {
				return fmt.Errorf("day %q must be a date as YYYY-MM-DD (the channel's day, China time)", args[1])
			}
			var out struct{ Lines int }
			raw, err := e.API.Call(ctx, "POST", APIPrefix+"/bills", map[string]string{"channel": args[0], "day": args[1]}, &out)
			if err != nil || e.Printed(raw) {
				return err
			}
			fmt.Fprintf(e.Out, "%s bill of %s: %d lines kept; run `keel recon run-now %s`\n", args[0], args[1], out.Lines, ReconChannel)
			return nil
		})}
}

func healthCmd(run modcli.Runner) *cobra.Command {
	return &cobra.Command{Use: "health", Short: "The payment module's health numbers", Args: cobra.NoArgs,
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, _ []string) error {
			var h Health
			raw, err := e.API.Call(ctx, "GET", APIPrefix+"/health", nil, &h)
			if err != nil || e.Printed(raw) {
				return err
			}
			modcli.Fields(e.Out, [][]string{{"Pending payments", strconv.FormatInt(h.PaymentsPending, 10)},
				{"Manual review", fmt.Sprintf("%d payments, %d refunds", h.PaymentsManual, h.RefundsManual)},
				{"Refunds unknown", strconv.FormatInt(h.RefundsUnknown, 10)},
				{"Oldest unbooked", h.OldestUnposted.String()},
				{"Open discrepancies", strconv.FormatInt(h.Discrepancies, 10)},
				{"Refused callbacks", strconv.FormatInt(h.SecurityRefusals, 10)}})
			return nil
		})}
}
