package reservation

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/keelwork/keel/module/modcli"
)

// The module's verbs under `keel reservations`: they act through a running
// server's API (the module's routes), print the module's own English words
// for states, kinds and runs, and check what they can before sending.

const reasonHelp = "why, at least 5 characters (goes to the audit log)"

// Commands are the module's verbs.
func Commands(run modcli.Runner) []*cobra.Command {
	return []*cobra.Command{modcli.Group("reservations",
		"List and act on the reservation module's reservations, slots, release runs and dead letters (through --server)",
		listCmd(run), getCmd(run), actionCmd(run, "checkin", false), actionCmd(run, "cancel", false),
		actionCmd(run, "restore", true), slotsCmd(run), runsCmd(run), deadLettersCmd(run), requeueCmd(run))}
}

// verb runs work through run with the command's arguments.
func verb(run modcli.Runner, work func(ctx context.Context, e *modcli.Env, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return run(cmd, func(ctx context.Context, e *modcli.Env) error { return work(ctx, e, args) })
	}
}

// english is a value's English word in one of the module's word tables,
// or the value itself for one this binary does not know (a newer server).
func english[K ~string](m map[K][2]string, key K) string {
	if w, ok := m[key]; ok {
		return w[1]
	}
	return string(key)
}

func stateText(s State) string {
	if s == "" {
		return "(new)"
	}
	return english(stateWords, s)
}

func stateNames() string {
	names := make([]string, len(AllStates))
	for i, s := range AllStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

func reservationPath(id string) (string, error) {
	if err := modcli.PositiveID("reservation", id); err != nil {
		return "", err
	}
	return apiPrefix + "/reservations/" + id, nil
}

// checkVerbReason applies the module's rule for audited actions before
// anything is sent.
func checkVerbReason(reason string) error {
	if utf8.RuneCountInString(strings.TrimSpace(reason)) < minReason {
		return fmt.Errorf("--reason is required: at least %d characters saying why (it goes to the audit log)", minReason)
	}
	return nil
}

func listCmd(run modcli.Runner) *cobra.Command {
	var state, slot, user, after string
	var limit int
	cmd := &cobra.Command{Use: "list", Short: "List reservations, newest first", Args: cobra.NoArgs,
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, _ []string) error {
			q := url.Values{}
			if state != "" {
				if !State(state).Valid() {
					return fmt.Errorf("unknown reservation state %q (one of %s)", state, stateNames())
				}
				q.Set("state", state)
			}
			if slot != "" {
				if err := modcli.PositiveID("slot", slot); err != nil {
					return err
				}
				q.Set("slot_id", slot)
			}
			if user != "" {
				q.Set("user_id", user)
			}
			modcli.PageQuery(q, limit, after)
			var page modcli.Page[*Reservation]
			raw, err := e.API.Call(ctx, "GET", apiPrefix+"/reservations?"+q.Encode(), nil, &page)
			if err != nil || e.Printed(raw) {
				return err
			}
			var rows [][]string
			for _, r := range page.Data {
				rows = append(rows, []string{strconv.FormatInt(r.ID, 10), r.UserID,
					fmt.Sprintf("%d/%d", r.ResourceID, r.SlotID), stateText(r.State), modcli.TS(r.StartsAt),
					modcli.OptTS(r.ExpectedReleaseAt)})
			}
			modcli.Table(e.Out, "ID\tUSER\tRESOURCE/SLOT\tSTATE\tSTARTS\tEXPECTED RELEASE", rows)
			e.AfterHint(page.NextCursor)
			return nil
		})}
	cmd.Flags().StringVar(&state, "state", "", "pending_payment, paid, checked_in, released, restored, cancelled or expired")
	cmd.Flags().StringVar(&slot, "slot", "", "only this slot's reservations")
	cmd.Flags().StringVar(&user, "user", "", "only this user's reservations")
	cmd.Flags().IntVar(&limit, "limit", 50, "page size (1..500)")
	cmd.Flags().StringVar(&after, "after", "", "continue after a previous page (the cursor it printed)")
	return cmd
}

func getCmd(run modcli.Runner) *cobra.Command {
	return &cobra.Command{Use: "get ID", Short: "Show a reservation with its history and notifications", Args: cobra.ExactArgs(1),
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, args []string) error {
			path, err := reservationPath(args[0])
			if err != nil {
				return err
			}
			var d ReservationDetail
			raw, err := e.API.Call(ctx, "GET", path, nil, &d)
			if err != nil || e.Printed(raw) {
				return modcli.NotFound("reservation", args[0], err)
			}
			if d.Reservation == nil {
				return fmt.Errorf("reservation %s: the server sent no reservation", args[0])
			}
			printReservation(e, &d)
			return nil
		})}
}

func printReservation(e *modcli.Env, d *ReservationDetail) {
	r := d.Reservation
	fmt.Fprintf(e.Out, "reservation %d  user %s  %s\n", r.ID, r.UserID, stateText(r.State))
	rows := [][]string{
		{"slot", fmt.Sprintf("%d (resource %d, category %s)", r.SlotID, r.ResourceID, r.CategoryID)},
		{"time", modcli.TS(r.StartsAt) + " – " + modcli.TS(r.EndsAt)},
		{"grace", fmt.Sprintf("%d min", r.GraceMinutes)},
		{"expected release", modcli.OptTS(r.ExpectedReleaseAt)},
		{"version", strconv.FormatInt(r.Version, 10)},
	}
	if r.HoldExpiresAt != nil {
		rows = append(rows, []string{"hold expires", modcli.TS(*r.HoldExpiresAt)})
	}
	if r.AppealUntil != nil {
		rows = append(rows, []string{"appeal until", modcli.TS(*r.AppealUntil)})
	}
	if r.RetryCount > 0 || r.LastError != "" {
		rows = append(rows, []string{"release retries", fmt.Sprintf("%d, last error %s", r.RetryCount, r.LastError)})
	}
	if r.DeadAt != nil {
		rows = append(rows, []string{"dead letter since", modcli.TS(*r.DeadAt)})
	}
	modcli.Fields(e.Out, rows)
	var hist [][]string
	for _, h := range d.History {
		hist = append(hist, []string{modcli.TS(h.At), stateText(h.FromState) + " → " + stateText(h.ToState),
			h.Actor, modcli.Short(h.Reason, 60)})
	}
	fmt.Fprintln(e.Out)
	modcli.Table(e.Out, "AT\tFROM → TO\tACTOR\tREASON", hist)
	if len(d.Notifications) == 0 {
		return
	}
	var notes [][]string
	for _, n := range d.Notifications {
		notes = append(notes, []string{english(kindWords, n.Kind), english(deliveryWords, n.State),
			modcli.TS(n.DeliverAt), strconv.Itoa(n.Attempts), modcli.Short(n.LastError, 50)})
	}
	fmt.Fprintln(e.Out)
	modcli.Table(e.Out, "NOTIFICATION\tDELIVERY\tDUE\tATTEMPTS\tLAST ERROR", notes)
}

// actions maps the verbs to the API's paths, their help and past tenses.
var actions = map[string]struct{ path, short, done string }{
	"checkin": {"check-in", "Check a reservation in", "checked in"},
	"cancel":  {"cancel", "Cancel a reservation", "cancelled"},
	"restore": {"restore", "Restore a released reservation on appeal (within the appeal window; audited)", "restored"},
}

func actionCmd(run modcli.Runner, action string, reasonRequired bool) *cobra.Command {
	var reason string
	var version int64
	act := actions[action]
	use := action + " ID [--reason TEXT]"
	if reasonRequired {
		use = action + " ID --reason TEXT"
	}
	cmd := &cobra.Command{Use: use, Short: act.short, Args: cobra.ExactArgs(1),
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, args []string) error {
			path, err := reservationPath(args[0])
			if err != nil {
				return err
			}
			if reasonRequired {
				if err := checkVerbReason(reason); err != nil {
					return err
				}
			}
			var r Reservation
			raw, err := e.API.Call(ctx, "POST", path+"/"+act.path, map[string]any{"reason": reason, "version": version}, &r)
			if err != nil || e.Printed(raw) {
				return modcli.NotFound("reservation", args[0], err)
			}
			fmt.Fprintf(e.Out, "reservation %d %s (now %s, version %d)\n", r.ID, act.done, stateText(r.State), r.Version)
			return nil
		})}
	if action == "checkin" {
		cmd.Aliases = []string{"check-in"}
	}
	help := "why (optional)"
	if reasonRequired {
		help = reasonHelp + " (required)"
	}
	cmd.Flags().StringVar(&reason, "reason", "", help)
	cmd.Flags().Int64Var(&version, "version", 0, "act only if the reservation is still at this version (0: whatever it is now)")
	return cmd
}

func slotsCmd(run modcli.Runner) *cobra.Command {
	var resource, from, to string
	var limit int
	cmd := &cobra.Command{Use: "slots", Short: "Show slots with their availability (capacity, held, free, waiting)", Args: cobra.NoArgs,
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, _ []string) error {
			q := url.Values{}
			if resource != "" {
				if err := modcli.PositiveID("resource", resource); err != nil {
					return err
				}
				q.Set("resource_id", resource)
			}
			for _, w := range []struct{ name, v string }{{"from", from}, {"to", to}} {
				if w.v == "" {
					continue
				}
				if _, err := time.Parse(time.RFC3339, w.v); err != nil {
					return fmt.Errorf("--%s must be an RFC 3339 time such as 2030-01-07T10:00:00+08:00, got %q", w.name, w.v)
				}
				q.Set(w.name, w.v)
			}
			if limit > 0 {
				q.Set("limit", strconv.Itoa(limit))
			}
			var page modcli.Page[*Slot]
			raw, err := e.API.Call(ctx, "GET", apiPrefix+"/slots?"+q.Encode(), nil, &page)
			if err != nil || e.Printed(raw) {
				return err
			}
			var rows [][]string
			for _, s := range page.Data {
				rows = append(rows, []string{strconv.FormatInt(s.ID, 10), fmt.Sprintf("%d %s", s.ResourceID, s.ResourceName),
					modcli.TS(s.StartsAt), modcli.TS(s.EndsAt), strconv.Itoa(s.Capacity), strconv.Itoa(s.Held),
					strconv.Itoa(s.Available), strconv.Itoa(s.Waiting)})
			}
			modcli.Table(e.Out, "SLOT\tRESOURCE\tSTARTS\tENDS\tCAPACITY\tHELD\tFREE\tWAITING", rows)
			return nil
		})}
	cmd.Flags().StringVar(&resource, "resource", "", "only this resource's slots")
	cmd.Flags().StringVar(&from, "from", "", "window start, RFC 3339 (default now)")
	cmd.Flags().StringVar(&to, "to", "", "window end, RFC 3339 (default 24 hours after the start)")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many slots (1..500; default the server's)")
	return cmd
}

func runsCmd(run modcli.Runner) *cobra.Command {
	var kind, after string
	var limit int
	cmd := &cobra.Command{Use: "runs", Short: "List release runs with their figures, newest first", Args: cobra.NoArgs,
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, _ []string) error {
			q := url.Values{}
			if kind != "" {
				if _, ok := runWords[kind]; !ok {
					return fmt.Errorf("unknown run kind %q (scan or compensation)", kind)
				}
				q.Set("kind", kind)
			}
			modcli.PageQuery(q, limit, after)
			var page modcli.Page[*Run]
			raw, err := e.API.Call(ctx, "GET", apiPrefix+"/runs?"+q.Encode(), nil, &page)
			if err != nil || e.Printed(raw) {
				return err
			}
			var rows [][]string
			for _, r := range page.Data {
				rows = append(rows, []string{strconv.FormatInt(r.ID, 10), english(runWords, r.Kind), modcli.TS(r.StartedAt),
					r.Duration().Round(time.Millisecond).String(), strconv.Itoa(r.Scanned), strconv.Itoa(r.Released),
					strconv.Itoa(r.Failed), modcli.Short(r.Errors, 50)})
			}
			modcli.Table(e.Out, "RUN\tKIND\tSTARTED\tDURATION\tSCANNED\tRELEASED\tFAILED\tERRORS", rows)
			e.AfterHint(page.NextCursor)
			return nil
		})}
	cmd.Flags().StringVar(&kind, "kind", "", "scan or compensation")
	cmd.Flags().IntVar(&limit, "limit", 50, "page size (1..500)")
	cmd.Flags().StringVar(&after, "after", "", "continue after a previous page (the cursor it printed)")
	return cmd
}

func deadLettersCmd(run modcli.Runner) *cobra.Command {
	var after string
	var limit int
	cmd := &cobra.Command{Use: "dead-letters", Short: "List reservations whose release failed past every retry", Args: cobra.NoArgs,
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, _ []string) error {
			q := url.Values{}
			modcli.PageQuery(q, limit, after)
			var page modcli.Page[*Reservation]
			raw, err := e.API.Call(ctx, "GET", apiPrefix+"/dead-letters?"+q.Encode(), nil, &page)
			if err != nil || e.Printed(raw) {
				return err
			}
			var rows [][]string
			for _, r := range page.Data {
				rows = append(rows, []string{strconv.FormatInt(r.ID, 10), r.UserID, fmt.Sprintf("%d/%d", r.ResourceID, r.SlotID),
					stateText(r.State), strconv.Itoa(r.RetryCount), modcli.OptTS(r.DeadAt), modcli.Short(r.LastError, 60)})
			}
			modcli.Table(e.Out, "ID\tUSER\tRESOURCE/SLOT\tSTATE\tRETRIES\tDEAD SINCE\tLAST ERROR", rows)
			e.AfterHint(page.NextCursor)
			return nil
		})}
	cmd.Flags().IntVar(&limit, "limit", 50, "page size (1..500)")
	cmd.Flags().StringVar(&after, "after", "", "continue after a previous page (the cursor it printed)")
	return cmd
}

func requeueCmd(run modcli.Runner) *cobra.Command {
	var reason string
	cmd := &cobra.Command{Use: "requeue ID --reason TEXT", Short: "Put a dead letter back for the next release run (audited)",
		Args: cobra.ExactArgs(1),
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, args []string) error {
			id := args[0]
			if err := modcli.PositiveID("reservation", id); err != nil {
				return err
			}
			if err := checkVerbReason(reason); err != nil {
				return err
			}
			var r Reservation
			raw, err := e.API.Call(ctx, "POST", apiPrefix+"/dead-letters/"+id+"/requeue", map[string]string{"reason": reason}, &r)
			if err != nil || e.Printed(raw) {
				return modcli.NotFound("reservation", id, err)
			}
			fmt.Fprintf(e.Out, "reservation %d requeued for the next release run (%s)\n", r.ID, stateText(r.State))
			return nil
		})}
	cmd.Flags().StringVar(&reason, "reason", "", reasonHelp+" (required)")
	return cmd
}
