package tracking

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/keelwork/keel/module/modcli"
	mweb "github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/modules/tracking/domain"
)

// The module's verbs under `keel tracking`: they act through a running
// server's API (the module's routes) and check what they can before
// sending, so that a typo gets a sentence and a non-zero exit rather than
// a request.

// Commands are the module's verbs.
func Commands(run modcli.Runner) []*cobra.Command {
	return []*cobra.Command{modcli.Group("tracking",
		"Search waybills, show a waybill's timeline and gaps, carrier health, replay and roll out mappings (through --server)",
		searchCmd(run), waybillCmd(run), carriersCmd(run), replayCmd(run), activateCmd(run))}
}

func verb(run modcli.Runner, work func(ctx context.Context, e *modcli.Env, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return run(cmd, func(ctx context.Context, e *modcli.Env) error { return work(ctx, e, args) })
	}
}

// cell keeps a table cell on one line whatever a carrier sent.
func cell(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\t", " ").Replace(s)
}

func table(e *modcli.Env, header string, rows [][]string) {
	for _, r := range rows {
		for j := range r {
			r[j] = cell(r[j])
		}
	}
	modcli.Table(e.Out, header, rows)
}

// waybillPath checks a carrier code and a waybill before any request.
func waybillPath(carrier, waybill string) (string, error) {
	if carrier == "" || len(carrier) > 32 || strings.ContainsAny(carrier, "/?#% ") {
		return "", fmt.Errorf("carrier %q is not a carrier code", carrier)
	}
	if waybill != "" && !domain.ValidWaybill(waybill) {
		return "", fmt.Errorf("waybill %q must be 4-40 of A-Z a-z 0-9 -", waybill)
	}
	p := APIPrefix + "/waybills/" + url.PathEscape(carrier)
	if waybill != "" {
		p += "/" + waybill
	}
	return p, nil
}

func mappingVersion(s string) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("the mapping version must be a positive integer, got %q", s)
	}
	return v, nil
}

func searchCmd(run modcli.Runner) *cobra.Command {
	var prefix, carrier string
	var limit int
	cmd := &cobra.Command{Use: "search", Short: "List waybills whose number starts with --q", Args: cobra.NoArgs,
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, _ []string) error {
			return Search(ctx, e, prefix, carrier, limit)
		})}
	cmd.Flags().StringVar(&prefix, "q", "", "waybill number prefix")
	cmd.Flags().StringVar(&carrier, "carrier", "", "only this carrier")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many")
	return cmd
}

// Search prints waybills whose number starts with prefix.
func Search(ctx context.Context, e *modcli.Env, prefix, carrier string, limit int) error {
	q := url.Values{}
	if prefix != "" {
		if strings.Trim(prefix, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-") != "" || len(prefix) > 40 {
			return fmt.Errorf("the waybill prefix %q must be A-Z a-z 0-9 -", prefix)
		}
		q.Set("q", prefix)
	}
	if carrier != "" {
		q.Set("carrier", carrier)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var page modcli.Page[map[string]any]
	raw, err := e.API.Call(ctx, "GET", APIPrefix+"/waybills?"+q.Encode(), nil, &page)
	if err != nil || e.Printed(raw) {
		return err
	}
	var rows [][]string
	for _, w := range page.Data {
		rows = append(rows, []string{fmt.Sprint(w["carrier"]), fmt.Sprint(w["waybill"]),
			domain.Milestone(fmt.Sprint(w["milestone"])).Word("zh"), fmt.Sprint(w["seq"]), fmt.Sprint(w["events"])})
	}
	table(e, "CARRIER\tWAYBILL\tSTATUS\tSEQ\tEVENTS", rows)
	return nil
}

func waybillCmd(run modcli.Runner) *cobra.Command {
	return &cobra.Command{Use: "waybill CARRIER WAYBILL", Short: "Show what the customer sees, the gaps and the timeline", Args: cobra.ExactArgs(2),
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, args []string) error {
			return ShowWaybill(ctx, e, args[0], args[1])
		})}
}

// ShowWaybill prints a waybill: what the customer sees, its gaps and its
// timeline.
func ShowWaybill(ctx context.Context, e *modcli.Env, carrier, waybill string) error {
	if waybill == "" {
		return fmt.Errorf("give the waybill number")
	}
	p, err := waybillPath(carrier, waybill)
	if err != nil {
		return err
	}
	var d WaybillDetail
	raw, err := e.API.Call(ctx, "GET", p, nil, &d)
	if err != nil || e.Printed(raw) {
		return err
	}
	fmt.Fprintf(e.Out, "%s %s: %s %s\n", d.Carrier, d.Waybill, d.View.StatusZH, strings.Join(d.View.Flags("zh"), " "))
	fmt.Fprintf(e.Out, "updated %s · verified %s · seq %d · revision %d · mapping v%d\n",
		modcli.OptTS(d.View.UpdatedAt), modcli.OptTS(d.View.VerifiedAt), d.Seq, d.Revision, d.Mapping)
	var gaps []string
	for _, g := range d.Gaps {
		state := "open"
		if g.ClosedAt != nil {
			state = "filled"
		}
		gaps = append(gaps, fmt.Sprintf("%d (%s)", g.Seq, state))
	}
	if len(gaps) > 0 {
		fmt.Fprintf(e.Out, "gaps: %s\n", strings.Join(gaps, ", "))
	}
	var rows [][]string
	for _, t := range d.Timeline {
		rows = append(rows, []string{strconv.FormatInt(t.Seq, 10), t.Code, domain.Milestone(t.Milestone).Word("zh"),
			modcli.OptTS(t.OccurredAt), t.Location, t.Via, t.Outcome})
	}
	table(e, "SEQ\tCODE\tMILESTONE\tOCCURRED\tLOCATION\tVIA\tRESULT", rows)
	return nil
}

func carriersCmd(run modcli.Runner) *cobra.Command {
	return &cobra.Command{Use: "carriers", Short: "Show each carrier's shares, breakers, gaps and refused pushes", Args: cobra.NoArgs,
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, _ []string) error { return ShowCarriers(ctx, e) })}
}

// ShowCarriers prints every carrier's health.
func ShowCarriers(ctx context.Context, e *modcli.Env) error {
	var page modcli.Page[*Health]
	raw, err := e.API.Call(ctx, "GET", APIPrefix+"/carriers", nil, &page)
	if err != nil || e.Printed(raw) {
		return err
	}
	share := func(s ShareHealth) string {
		return fmt.Sprintf("%.0f/s %d%% q%d %s", s.Share, int(s.Used*100), s.Backlog, s.Breaker)
	}
	var rows [][]string
	for _, h := range page.Data {
		rows = append(rows, []string{h.Carrier, fmt.Sprintf("%.0f/s", h.Quota), share(h.Realtime), share(h.Backfill),
			strconv.FormatInt(h.OpenGaps, 10), "v" + strconv.Itoa(h.MappingVer), strconv.FormatInt(h.Refused, 10)})
	}
	table(e, "CARRIER\tQUOTA\tREALTIME\tBACKFILL\tOPEN GAPS\tMAPPING\tREFUSED", rows)
	return nil
}

func replayCmd(run modcli.Runner) *cobra.Command {
	return &cobra.Command{Use: "replay CARRIER VERSION", Short: "Replay a draft mapping version over history and show its diff", Args: cobra.ExactArgs(2),
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, args []string) error { return Replay(ctx, e, args[0], args[1]) })}
}

// Replay replays a mapping version and prints its diff.
func Replay(ctx context.Context, e *modcli.Env, carrier, version string) error {
	if _, err := waybillPath(carrier, ""); err != nil {
		return err
	}
	v, err := mappingVersion(version)
	if err != nil {
		return err
	}
	var res ReplayResult
	raw, err := e.API.Call(ctx, "POST", fmt.Sprintf("%s/carriers/%s/mappings/%d/replay", APIPrefix, carrier, v), nil, &res)
	if err != nil || e.Printed(raw) {
		return err
	}
	fmt.Fprintf(e.Out, "v%d → v%d: %d waybills compared, %d would change\n", res.BaseVersion, res.Version, res.Waybills, res.Changed)
	var rows [][]string
	for _, x := range res.Entries {
		note := ""
		if x.Stays {
			note = "rollout leaves it"
		}
		rows = append(rows, []string{x.Waybill, x.From.Word("zh"), x.To.Word("zh"), note})
	}
	table(e, "WAYBILL\tNOW\tNEW MAPPING\t", rows)
	return nil
}

func activateCmd(run modcli.Runner) *cobra.Command {
	var reason string
	cmd := &cobra.Command{Use: "activate CARRIER VERSION", Short: "Roll a replayed mapping version out (audited)", Args: cobra.ExactArgs(2),
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, args []string) error {
			return Activate(ctx, e, args[0], args[1], reason)
		})}
	cmd.Flags().StringVar(&reason, "reason", "", "why, at least 5 characters (goes to the audit log)")
	return cmd
}

// Activate rolls a replayed mapping version out.
func Activate(ctx context.Context, e *modcli.Env, carrier, version, reason string) error {
	if _, err := waybillPath(carrier, ""); err != nil {
		return err
	}
	v, err := mappingVersion(version)
	if err != nil {
		return err
	}
	if len([]rune(strings.TrimSpace(reason))) < mweb.MinReasonRunes {
		return fmt.Errorf("give a reason of at least %d characters (--reason)", mweb.MinReasonRunes)
	}
	var out map[string]any
	raw, err := e.API.Call(ctx, "POST", fmt.Sprintf("%s/carriers/%s/mappings/%d/activate", APIPrefix, carrier, v),
		map[string]string{"reason": reason}, &out)
	if err != nil || e.Printed(raw) {
		return err
	}
	fmt.Fprintf(e.Out, "%s mapping v%d is active; %v waiting events applied\n", carrier, v, out["applied_waiting_events"])
	return nil
}
