package cli

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel/keelevents/eventsweb"
	"github.com/keelwork/keel/keelrecon"
)

// ReconPrefix is where the reconciliation API lives; ApprovalsPrefix the
// approvals'.
const (
	ReconPrefix     = "/api/v1/recon"
	ApprovalsPrefix = "/api/v1/approvals"
)

type apiList[T any] struct {
	Data       []T   `json:"data"`
	NextBefore int64 `json:"next_before,omitempty"`
}

func beforeHint(o *AdminOpts, next int64) {
	if next > 0 && o.Err != nil {
		fmt.Fprintf(o.Err, "more: --before %d\n", next)
	}
}

var discrepancyStateWords = map[keelrecon.State]string{
	keelrecon.StateOpen: "open", keelrecon.StateAutoHealed: "auto-healed", keelrecon.StateAwaitingApproval: "awaiting approval",
	keelrecon.StateApproved: "approved", keelrecon.StateExecuted: "executed", keelrecon.StateVerified: "verified",
	keelrecon.StateRejected: "rejected", keelrecon.StateResolved: "resolved by itself",
}

var classWords = map[keelrecon.Class]string{
	keelrecon.MissingOurs: "missing on our side", keelrecon.MissingTheirs: "missing on theirs", keelrecon.Duplicate: "duplicate",
	keelrecon.AmountMismatch: "amount mismatch", keelrecon.StatusMismatch: "status mismatch", keelrecon.Other: "other",
}

func stateNames() string {
	names := make([]string, len(keelrecon.States))
	for i, s := range keelrecon.States {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

func classNames() string {
	names := make([]string, len(keelrecon.Classes))
	for i, c := range keelrecon.Classes {
		names[i] = string(c)
	}
	return strings.Join(names, ", ")
}

// idPath checks an id before anything is sent.
func idPath(what, prefix, id string) (string, error) {
	if _, err := positiveID(what, id); err != nil {
		return "", err
	}
	return prefix + "/" + id, nil
}

func checkActionReason(reason string) (string, error) {
	r, err := keelrecon.CheckReason(reason)
	if err != nil {
		return "", fmt.Errorf("--reason is required: %d to %d characters saying why, without control characters (it goes to the audit log)",
			keelrecon.MinReason, keelrecon.MaxReason)
	}
	return r, nil
}

// ReconReconcilers lists the registered reconcilers.
func ReconReconcilers(ctx context.Context, c *APIClient, o *AdminOpts) error {
	var l apiList[keelrecon.Info]
	raw, err := c.Call(ctx, "GET", ReconPrefix+"/reconcilers", nil, &l)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, r := range l.Data {
		sched := "on demand"
		if r.Scheduled {
			sched = "scheduled"
		}
		rows = append(rows, []string{r.Name, r.RuleVersion, sched})
	}
	table(o.Out, "NAME\tRULES\tRUNS", rows)
	return nil
}

// ReconRuns lists runs, newest first.
func ReconRuns(ctx context.Context, c *APIClient, o *AdminOpts, reconciler string, limit int, before int64) error {
	q := url.Values{}
	if reconciler != "" {
		q.Set("reconciler", reconciler)
	}
	listQuery(q, limit, before)
	var l apiList[*keelrecon.Run]
	raw, err := c.Call(ctx, "GET", ReconPrefix+"/runs?"+q.Encode(), nil, &l)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, r := range l.Data {
		rows = append(rows, []string{strconv.FormatInt(r.ID, 10), r.Reconciler, r.Trigger, r.State, ts(r.Cutoff),
			strconv.FormatInt(r.Compared, 10), strconv.FormatInt(r.Found, 10), strconv.FormatInt(r.Opened, 10),
			strconv.FormatInt(r.Healed, 10), strconv.FormatInt(r.Verified, 10)})
	}
	table(o.Out, "ID\tRECONCILER\tTRIGGER\tSTATE\tCUTOFF\tCOMPARED\tFOUND\tOPENED\tHEALED\tVERIFIED", rows)
	beforeHint(o, l.NextBefore)
	return nil
}

func listQuery(q url.Values, limit int, before int64) {
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if before > 0 {
		q.Set("before", strconv.FormatInt(before, 10))
	}
}

// ReconRunGet prints one run with its totals.
func ReconRunGet(ctx context.Context, c *APIClient, o *AdminOpts, id string) error {
	path, err := idPath("run", ReconPrefix+"/runs", id)
	if err != nil {
		return err
	}
	var r keelrecon.Run
	raw, err := c.Call(ctx, "GET", path, nil, &r)
	if err != nil || printed(o, raw) {
		return notFound("run", id, err)
	}
	printRun(o, &r)
	return nil
}

func printRun(o *AdminOpts, r *keelrecon.Run) {
	fmt.Fprintf(o.Out, "run %d  %s  %s\n", r.ID, r.Reconciler, r.State)
	rows := [][]string{{"rule version", r.RuleVersion}, {"cutoff", ts(r.Cutoff)}, {"trigger", r.Trigger + " by " + r.RequestedBy},
		{"compared", strconv.FormatInt(r.Compared, 10)}, {"discrepancies", strconv.FormatInt(r.Found, 10)},
		{"applied", fmt.Sprintf("%t (opened %d, reopened %d, healed %d, verified %d, resolved %d)", r.Applied, r.Opened, r.Reopened,
			r.Healed, r.Verified, r.Resolved)}, {"digest", r.Digest}}
	if r.Error != "" {
		rows = append(rows, []string{"error", r.Error})
	}
	fields(o.Out, rows)
	var totals [][]string
	for _, cl := range keelrecon.Classes {
		t, ok := r.Totals[cl]
		if !ok {
			continue
		}
		var amounts []string
		for cur, n := range t.Amounts {
			amounts = append(amounts, eventsweb.Money(n, cur))
		}
		totals = append(totals, []string{classWords[cl], strconv.FormatInt(t.Count, 10), strings.Join(amounts, "; ")})
	}
	if len(totals) > 0 {
		fmt.Fprintln(o.Out)
		table(o.Out, "CLASS\tCOUNT\tIMPACT", totals)
	}
}

// ReconRunNow runs a reconciler now on the server.
func ReconRunNow(ctx context.Context, c *APIClient, o *AdminOpts, reconciler, cutoff string) error {
	if cutoff != "" {
		if _, err := time.Parse(time.RFC3339Nano, cutoff); err != nil {
			return fmt.Errorf("--cutoff must be an RFC 3339 time, got %q", cutoff)
		}
	}
	var r keelrecon.Run
	raw, err := c.Call(ctx, "POST", ReconPrefix+"/runs", map[string]string{"reconciler": reconciler, "cutoff": cutoff}, &r)
	if err != nil || printed(o, raw) {
		return notFound("reconciler", reconciler, localRefusal(o, "running reconciler "+reconciler, err))
	}
	printRun(o, &r)
	return nil
}

// DiscrepancyFilter selects discrepancies for `keel recon list`.
type DiscrepancyFilter struct {
	Reconciler, State, Class, Key string
	Limit                         int
	Before                        int64
}

func (f *DiscrepancyFilter) query() (url.Values, error) {
	q := url.Values{}
	if f.State != "" {
		if !keelrecon.State(f.State).Valid() {
			return nil, fmt.Errorf("unknown discrepancy state %q (one of %s)", f.State, stateNames())
		}
		q.Set("state", f.State)
	}
	if f.Class != "" {
		if !keelrecon.Class(f.Class).Valid() {
			return nil, fmt.Errorf("unknown discrepancy class %q (one of %s)", f.Class, classNames())
		}
		q.Set("class", f.Class)
	}
	for k, v := range map[string]string{"reconciler": f.Reconciler, "key": f.Key} {
		if v != "" {
			q.Set(k, v)
		}
	}
	listQuery(q, f.Limit, f.Before)
	return q, nil
}

// ReconList lists discrepancies, newest first.
func ReconList(ctx context.Context, c *APIClient, o *AdminOpts, f *DiscrepancyFilter) error {
	q, err := f.query()
	if err != nil {
		return err
	}
	var l apiList[*keelrecon.DiscrepancyRow]
	raw, err := c.Call(ctx, "GET", ReconPrefix+"/discrepancies?"+q.Encode(), nil, &l)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, d := range l.Data {
		approval := "one operator"
		if d.NeedsApproval {
			approval = "four-eyes"
		} else if d.SafeAutoHeal {
			approval = "safe to heal"
		}
		rows = append(rows, []string{strconv.FormatInt(d.ID, 10), d.Reconciler, classWords[d.Class], short(d.Key, 40),
			discrepancyStateWords[d.State], eventsweb.Money(d.Impact, d.Currency), approval, short(d.SuggestedAction, 40)})
	}
	table(o.Out, "ID\tRECONCILER\tCLASS\tKEY\tSTATE\tIMPACT\tAPPROVAL\tSUGGESTED ACTION", rows)
	beforeHint(o, l.NextBefore)
	return nil
}

// ReconGet prints a discrepancy with its evidence side by side.
func ReconGet(ctx context.Context, c *APIClient, o *AdminOpts, id string) error {
	path, err := idPath("discrepancy", ReconPrefix+"/discrepancies", id)
	if err != nil {
		return err
	}
	var d keelrecon.DiscrepancyRow
	raw, err := c.Call(ctx, "GET", path, nil, &d)
	if err != nil || printed(o, raw) {
		return notFound("discrepancy", id, err)
	}
	printDiscrepancy(o, &d)
	return nil
}

func printDiscrepancy(o *AdminOpts, d *keelrecon.DiscrepancyRow) {
	fmt.Fprintf(o.Out, "discrepancy %d  %s  %s  %s\n", d.ID, d.Reconciler, classWords[d.Class], discrepancyStateWords[d.State])
	rows := [][]string{{"key", d.Key}, {"suggested action", d.SuggestedAction}, {"impact", eventsweb.Money(d.Impact, d.Currency)},
		{"needs approval", strconv.FormatBool(d.NeedsApproval)}, {"found by runs", fmt.Sprintf("%d … %d", d.FirstRunID, d.LastRunID)}}
	if d.ActionID != "" {
		rows = append(rows, []string{"action id", d.ActionID})
	}
	if d.ApprovalID != nil {
		rows = append(rows, []string{"approval", strconv.FormatInt(*d.ApprovalID, 10)})
	}
	if d.ExecutedBy != "" {
		rows = append(rows, []string{"executed", d.ExecutedBy + " at " + optTS(d.ExecutedAt)})
	}
	if d.VerifiedRunID != nil {
		rows = append(rows, []string{"verified by run", strconv.FormatInt(*d.VerifiedRunID, 10)})
	}
	fields(o.Out, rows)
	ev := eventsweb.Evidence(d.Evidence)
	header := "FIELD"
	for _, s := range ev.Sources {
		header += "\t" + strings.ToUpper(s)
	}
	var erows [][]string
	for _, r := range ev.Rows {
		f := r.Field
		if r.Differs {
			f += " *"
		}
		erows = append(erows, append([]string{f}, r.Values...))
	}
	fmt.Fprintln(o.Out)
	table(o.Out, header, erows)
}

var reconActions = map[string]string{"request": "approval requested", "approve": "approved", "reject": "rejected", "execute": "executed"}

// ReconAction requests approval for, approves, rejects or executes a
// discrepancy's action.
func ReconAction(ctx context.Context, c *APIClient, o *AdminOpts, action, id, reason string) error {
	done, ok := reconActions[action]
	if !ok {
		return fmt.Errorf("unknown action %q (request, approve, reject or execute)", action)
	}
	path, err := idPath("discrepancy", ReconPrefix+"/discrepancies", id)
	if err != nil {
		return err
	}
	if reason, err = checkActionReason(reason); err != nil {
		return err
	}
	var d keelrecon.DiscrepancyRow
	raw, err := c.Call(ctx, "POST", path+"/"+action, map[string]string{"reason": reason}, &d)
	if err != nil || printed(o, raw) {
		return notFound("discrepancy", id, localRefusal(o, action+" of discrepancy "+id, err))
	}
	fmt.Fprintf(o.Out, "discrepancy %d %s: now %s\n", d.ID, done, discrepancyStateWords[d.State])
	return nil
}

var approvalStateWords = map[keelrecon.ApprovalState]string{keelrecon.ApprovalPending: "pending", keelrecon.ApprovalApproved: "approved",
	keelrecon.ApprovalRejected: "rejected", keelrecon.ApprovalExecuted: "executed", keelrecon.ApprovalCancelled: "cancelled"}

// ApprovalsList lists approval requests: with awaiting, the pending ones
// the caller may decide (someone else's).
func ApprovalsList(ctx context.Context, c *APIClient, o *AdminOpts, awaiting bool, state string, limit int, before int64) error {
	q := url.Values{}
	if awaiting {
		q.Set("awaiting", "me")
	} else if state != "" {
		if !keelrecon.ApprovalState(state).Valid() {
			return fmt.Errorf("unknown approval state %q (pending, approved, rejected, executed or cancelled)", state)
		}
		q.Set("state", state)
	}
	listQuery(q, limit, before)
	var l apiList[*keelrecon.Approval]
	raw, err := c.Call(ctx, "GET", ApprovalsPrefix+"?"+q.Encode(), nil, &l)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, a := range l.Data {
		rows = append(rows, []string{strconv.FormatInt(a.ID, 10), a.Kind, short(a.Target, 30), short(a.Summary, 30),
			eventsweb.Money(a.Amount, a.Currency), a.RequestedBy, approvalStateWords[a.State], a.DecidedBy, ts(a.RequestedAt)})
	}
	table(o.Out, "ID\tKIND\tTARGET\tACTION\tAMOUNT\tREQUESTED BY\tSTATE\tDECIDED BY\tREQUESTED", rows)
	beforeHint(o, l.NextBefore)
	return nil
}

// ApprovalAction approves, rejects or executes an approval request.
func ApprovalAction(ctx context.Context, c *APIClient, o *AdminOpts, action, id, reason string) error {
	if action != "approve" && action != "reject" && action != "execute" {
		return fmt.Errorf("unknown action %q (approve, reject or execute)", action)
	}
	path, err := idPath("approval", ApprovalsPrefix, id)
	if err != nil {
		return err
	}
	if reason, err = checkActionReason(reason); err != nil {
		return err
	}
	var a keelrecon.Approval
	raw, err := c.Call(ctx, "POST", path+"/"+action, map[string]string{"reason": reason}, &a)
	if err != nil || printed(o, raw) {
		return notFound("approval", id, localRefusal(o, action+" of approval "+id, err))
	}
	fmt.Fprintf(o.Out, "approval %d %s: now %s\n", a.ID, reconActions[action], approvalStateWords[a.State])
	return nil
}
