package cli

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/modules/tracking"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/server/api"
)

// trackingPath checks a carrier code and a waybill before any request.
func trackingPath(carrier, waybill string) (string, error) {
	if carrier == "" || len(carrier) > 32 || strings.ContainsAny(carrier, "/?#% ") {
		return "", fmt.Errorf("carrier %q is not a carrier code", carrier)
	}
	if waybill != "" && !domain.ValidWaybill(waybill) {
		return "", fmt.Errorf("waybill %q must be 4-40 of A-Z a-z 0-9 -", waybill)
	}
	p := tracking.APIPrefix + "/waybills/" + url.PathEscape(carrier)
	if waybill != "" {
		p += "/" + waybill
	}
	return p, nil
}

// TrackingSearch prints waybills whose number starts with prefix.
func TrackingSearch(ctx context.Context, c *APIClient, o *AdminOpts, prefix, carrier string, limit int) error {
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
	var page api.Page[map[string]any]
	raw, err := c.Call(ctx, "GET", tracking.APIPrefix+"/waybills?"+q.Encode(), nil, &page)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, w := range page.Data {
		rows = append(rows, []string{fmt.Sprint(w["carrier"]), fmt.Sprint(w["waybill"]),
			domain.Milestone(fmt.Sprint(w["milestone"])).Word("zh"), fmt.Sprint(w["seq"]), fmt.Sprint(w["events"])})
	}
	table(o.Out, "CARRIER\tWAYBILL\tSTATUS\tSEQ\tEVENTS", rows)
	return nil
}

// TrackingWaybill prints a waybill: what the customer sees, its gaps and
// its timeline.
func TrackingWaybill(ctx context.Context, c *APIClient, o *AdminOpts, carrier, waybill string) error {
	p, err := trackingPath(carrier, waybill)
	if err != nil {
		return err
	}
	if waybill == "" {
		return fmt.Errorf("give the waybill number")
	}
	var d tracking.WaybillDetail
	raw, err := c.Call(ctx, "GET", p, nil, &d)
	if err != nil || printed(o, raw) {
		return err
	}
	fmt.Fprintf(o.Out, "%s %s: %s %s\n", d.Carrier, d.Waybill, d.View.StatusZH, strings.Join(d.View.Flags("zh"), " "))
	fmt.Fprintf(o.Out, "updated %s · verified %s · seq %d · revision %d · mapping v%d\n",
		optTS(d.View.UpdatedAt), optTS(d.View.VerifiedAt), d.Seq, d.Revision, d.Mapping)
	var gaps []string
	for _, g := range d.Gaps {
		state := "open"
		if g.ClosedAt != nil {
			state = "filled"
		}
		gaps = append(gaps, fmt.Sprintf("%d (%s)", g.Seq, state))
	}
	if len(gaps) > 0 {
		fmt.Fprintf(o.Out, "gaps: %s\n", strings.Join(gaps, ", "))
	}
	var rows [][]string
	for _, e := range d.Timeline {
		rows = append(rows, []string{strconv.FormatInt(e.Seq, 10), e.Code, domain.Milestone(e.Milestone).Word("zh"),
			optTS(e.OccurredAt), e.Location, e.Via, e.Outcome})
	}
	table(o.Out, "SEQ\tCODE\tMILESTONE\tOCCURRED\tLOCATION\tVIA\tRESULT", rows)
	return nil
}

// TrackingCarriers prints every carrier's health.
func TrackingCarriers(ctx context.Context, c *APIClient, o *AdminOpts) error {
	var page api.Page[*tracking.Health]
	raw, err := c.Call(ctx, "GET", tracking.APIPrefix+"/carriers", nil, &page)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	share := func(s tracking.ShareHealth) string {
		return fmt.Sprintf("%.0f/s %d%% q%d %s", s.Share, int(s.Used*100), s.Backlog, s.Breaker)
	}
	for _, h := range page.Data {
		rows = append(rows, []string{h.Carrier, fmt.Sprintf("%.0f/s", h.Quota), share(h.Realtime), share(h.Backfill),
			strconv.FormatInt(h.OpenGaps, 10), "v" + strconv.Itoa(h.MappingVer), strconv.FormatInt(h.Refused, 10)})
	}
	table(o.Out, "CARRIER\tQUOTA\tREALTIME\tBACKFILL\tOPEN GAPS\tMAPPING\tREFUSED", rows)
	return nil
}

// TrackingReplay replays a mapping version and prints its diff.
func TrackingReplay(ctx context.Context, c *APIClient, o *AdminOpts, carrier string, version int) error {
	if _, err := trackingPath(carrier, ""); err != nil {
		return err
	}
	if version < 1 {
		return fmt.Errorf("the mapping version must be a positive integer")
	}
	var res tracking.ReplayResult
	raw, err := c.Call(ctx, "POST", fmt.Sprintf("%s/carriers/%s/mappings/%d/replay", tracking.APIPrefix, carrier, version), nil, &res)
	if err != nil || printed(o, raw) {
		return err
	}
	fmt.Fprintf(o.Out, "v%d → v%d: %d waybills compared, %d would change\n", res.BaseVersion, res.Version, res.Waybills, res.Changed)
	var rows [][]string
	for _, e := range res.Entries {
		note := ""
		if e.Stays {
			note = "rollout leaves it"
		}
		rows = append(rows, []string{e.Waybill, e.From.Word("zh"), e.To.Word("zh"), note})
	}
	table(o.Out, "WAYBILL\tNOW\tNEW MAPPING\t", rows)
	return nil
}

// TrackingActivate rolls a replayed mapping version out.
func TrackingActivate(ctx context.Context, c *APIClient, o *AdminOpts, carrier string, version int, reason string) error {
	if _, err := trackingPath(carrier, ""); err != nil {
		return err
	}
	if len([]rune(strings.TrimSpace(reason))) < web.MinReasonRunes {
		return fmt.Errorf("give a reason of at least %d characters (--reason)", web.MinReasonRunes)
	}
	var out map[string]any
	raw, err := c.Call(ctx, "POST", fmt.Sprintf("%s/carriers/%s/mappings/%d/activate", tracking.APIPrefix, carrier, version),
		map[string]string{"reason": reason}, &out)
	if err != nil || printed(o, raw) {
		return err
	}
	fmt.Fprintf(o.Out, "%s mapping v%d is active; %v waiting events applied\n", carrier, version, out["applied_waiting_events"])
	return nil
}
