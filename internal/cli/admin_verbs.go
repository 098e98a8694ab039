package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel/module/modcli"
	"github.com/keelwork/keel/server/api"
	"github.com/keelwork/keel/server/auth"
)

// JobFilter selects jobs for `keel jobs list` and bulk `keel jobs retry`.
type JobFilter struct {
	States  []string
	Kinds   []string
	Queues  []string
	FlowKey string
	Limit   int
	Cursor  string
}

func (f *JobFilter) query() url.Values {
	q := url.Values{}
	if len(f.States) > 0 {
		q.Set("state", strings.Join(f.States, ","))
	}
	if len(f.Kinds) > 0 {
		q.Set("kind", strings.Join(f.Kinds, ","))
	}
	if len(f.Queues) > 0 {
		q.Set("queue", strings.Join(f.Queues, ","))
	}
	if f.FlowKey != "" {
		q.Set("flow_key", f.FlowKey)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Cursor != "" {
		q.Set("after", f.Cursor)
	}
	return q
}

// Empty reports whether no filter is set (bulk actions refuse that).
func (f *JobFilter) Empty() bool {
	return len(f.States) == 0 && len(f.Kinds) == 0 && len(f.Queues) == 0 && f.FlowKey == ""
}

// table prints rows aligned under header by the same rules as the
// modules' verbs (modcli), as one block: a cell's own tabs and line breaks
// (an error message's) become spaces, since either would start a
// separately aligned block.
func table(out io.Writer, header string, rows [][]string) {
	clean := make([][]string, len(rows))
	for i, r := range rows {
		clean[i] = make([]string, len(r))
		for j, c := range r {
			clean[i][j] = cellText(c)
		}
	}
	modcli.Table(out, header, clean)
}

func cellText(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\t", " ").Replace(s)
}

func printed(o *AdminOpts, raw []byte) bool {
	if o.JSON {
		fmt.Fprintln(o.Out, strings.TrimSpace(string(raw)))
	}
	return o.JSON
}

func short(s string, n int) string { return modcli.Short(s, n) }

func ts(t time.Time) string { return modcli.TS(t) }

func nextHint(o *AdminOpts, next string) {
	if next != "" && o.Err != nil {
		fmt.Fprintf(o.Err, "more: --after %s\n", next)
	}
}

// JobsList prints one page of jobs, newest first.
func JobsList(ctx context.Context, c *APIClient, o *AdminOpts, f *JobFilter) error {
	var page api.Page[*api.Job]
	raw, err := c.Call(ctx, "GET", api.Prefix+"/jobs?"+f.query().Encode(), nil, &page)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, j := range page.Data {
		why := ""
		if n := len(j.Errors); n > 0 {
			why = j.Errors[n-1].Message
		}
		if j.WaitReason != "" {
			why = j.WaitReason
		}
		rows = append(rows, []string{strconv.FormatInt(j.ID, 10), j.Kind, j.Queue, string(j.State),
			fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts), j.FlowKey, ts(j.CreatedAt), short(why, 60)})
	}
	table(o.Out, "ID\tKIND\tQUEUE\tSTATE\tATTEMPT\tFLOW KEY\tCREATED\tREASON", rows)
	nextHint(o, page.NextCursor)
	return nil
}

// JobGet prints one job with its error history.
func JobGet(ctx context.Context, c *APIClient, o *AdminOpts, id string) error {
	var j api.Job
	raw, err := c.Call(ctx, "GET", api.Prefix+"/jobs/"+url.PathEscape(id), nil, &j)
	if err != nil || printed(o, raw) {
		return err
	}
	fmt.Fprintf(o.Out, "job %d  %s  queue %s  state %s  attempt %d/%d  fence %d\n", j.ID, j.Kind, j.Queue, j.State,
		j.Attempt, j.MaxAttempts, j.Fence)
	if j.FlowKey != "" {
		fmt.Fprintf(o.Out, "flow key %s\n", j.FlowKey)
	}
	if j.WaitReason != "" {
		fmt.Fprintf(o.Out, "waiting for %s\n", j.WaitReason)
	}
	fmt.Fprintf(o.Out, "args %s\nresult %s\n", string(j.Args), string(j.Result))
	var rows [][]string
	for _, e := range j.Errors {
		rows = append(rows, []string{strconv.Itoa(e.Attempt), string(e.Class), ts(e.At), e.Message})
	}
	if len(rows) > 0 {
		table(o.Out, "ATTEMPT\tCLASS\tAT\tMESSAGE", rows)
	}
	return nil
}

// JobAction cancels, retries or deletes one job.
func JobAction(ctx context.Context, c *APIClient, o *AdminOpts, action, id, reason string) error {
	method, path := "POST", api.Prefix+"/jobs/"+url.PathEscape(id)+"/"+action
	if action == "delete" {
		method, path = "DELETE", api.Prefix+"/jobs/"+url.PathEscape(id)
	}
	var j api.Job
	raw, err := c.Call(ctx, method, path, map[string]string{"reason": reason}, &j)
	if err != nil || printed(o, raw) {
		return err
	}
	fmt.Fprintf(o.Out, "job %d: %s (now %s)\n", j.ID, action, j.State)
	return nil
}

// JobsRetryAll retries every job the filter matches, page by page, with a
// progress bar. The matching ids are collected first so that the retried
// jobs (now available) cannot shift the pages.
func JobsRetryAll(ctx context.Context, c *APIClient, o *AdminOpts, f *JobFilter, reason string) error {
	var ids []int64
	f.Limit, f.Cursor = api.MaxLimit, ""
	for {
		var page api.Page[*api.Job]
		if _, err := c.Call(ctx, "GET", api.Prefix+"/jobs?"+f.query().Encode(), nil, &page); err != nil {
			return err
		}
		for _, j := range page.Data {
			ids = append(ids, j.ID)
		}
		if page.NextCursor == "" {
			break
		}
		f.Cursor = page.NextCursor
	}
	bar := bulkBar(o.Err)
	failed := 0
	for i, id := range ids {
		if _, err := c.Call(ctx, "POST", fmt.Sprintf("%s/jobs/%d/retry", api.Prefix, id), map[string]string{"reason": reason}, nil); err != nil {
			failed++
			fmt.Fprintf(o.Err, "\njob %d: %v\n", id, err)
		}
		bar(i+1, len(ids))
	}
	fmt.Fprintf(o.Out, "retried %d of %d job(s)\n", len(ids)-failed, len(ids))
	if failed > 0 {
		return fmt.Errorf("%d job(s) could not be retried", failed)
	}
	return nil
}

// bulkBar redraws one progress line on a terminal; elsewhere (a log, a
// pipe) it prints a line per tenth of the work and the last.
func bulkBar(out io.Writer) func(done, total int) {
	tty := isTerminal(out)
	return func(done, total int) {
		if !tty {
			if step := max(total/10, 1); done%step == 0 || done == total {
				fmt.Fprintf(out, "%d/%d done\n", done, total)
			}
			return
		}
		const width = 30
		filled := width * done / max(total, 1)
		fmt.Fprintf(out, "\r[%s%s] %d/%d", strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total)
		if done == total {
			fmt.Fprintln(out)
		}
	}
}

// QueuesList prints every queue with its depth.
func QueuesList(ctx context.Context, c *APIClient, o *AdminOpts) error {
	var page api.Page[*api.Queue]
	raw, err := c.Call(ctx, "GET", api.Prefix+"/queues", nil, &page)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, q := range page.Data {
		var depth []string
		for st, n := range q.Counts {
			depth = append(depth, fmt.Sprintf("%s=%d", st, n))
		}
		state := "active"
		if q.Paused {
			state = "paused by " + q.PausedBy
		}
		rows = append(rows, []string{q.Name, state, strings.Join(depth, " "), fmt.Sprintf("%.0fs", q.OldestAgeSeconds)})
	}
	table(o.Out, "QUEUE\tSTATE\tDEPTH\tOLDEST", rows)
	return nil
}

// QueueAction pauses or resumes a queue.
func QueueAction(ctx context.Context, c *APIClient, o *AdminOpts, action, name, reason string) error {
	raw, err := c.Call(ctx, "POST", api.Prefix+"/queues/"+url.PathEscape(name)+"/"+action, map[string]string{"reason": reason}, nil)
	if err != nil || printed(o, raw) {
		return err
	}
	fmt.Fprintf(o.Out, "queue %s: %s\n", name, action)
	return nil
}

// KeysList prints flow key states.
// The keys of finished batches are left out unless finished.
func KeysList(ctx context.Context, c *APIClient, o *AdminOpts, prefix string, paused, tripped, finished bool, limit int, cursor string) error {
	q := url.Values{}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if paused {
		q.Set("paused", "true")
	}
	if tripped {
		q.Set("tripped", "true")
	}
	if finished {
		q.Set("finished", "true")
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("after", cursor)
	}
	var page api.Page[*api.FlowKey]
	raw, err := c.Call(ctx, "GET", api.Prefix+"/flow/keys?"+q.Encode(), nil, &page)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, k := range page.Data {
		state := "active"
		if k.Paused {
			state = "paused (" + k.PauseReason + ")"
		}
		rows = append(rows, []string{k.Key, state, string(k.Breaker), strconv.Itoa(k.ConsecutiveFailures), short(k.LastError, 60)})
	}
	table(o.Out, "KEY\tSTATE\tBREAKER\tFAILURES\tLAST ERROR", rows)
	nextHint(o, page.NextCursor)
	return nil
}

// KeyGet prints one flow key.
func KeyGet(ctx context.Context, c *APIClient, o *AdminOpts, key string) error {
	var k api.FlowKey
	raw, err := c.Call(ctx, "GET", api.Prefix+"/flow/keys/"+url.PathEscape(key), nil, &k)
	if err != nil || printed(o, raw) {
		return err
	}
	fmt.Fprintf(o.Out, "key %s  paused %v %s  breaker %s  failures %d  running %d\nlast error %s\n", k.Key, k.Paused,
		k.PauseReason, k.Breaker, k.ConsecutiveFailures, k.Running, k.LastError)
	return nil
}

// KeyAction pauses, resumes or closes the breaker of a key.
func KeyAction(ctx context.Context, c *APIClient, o *AdminOpts, action, key, reason string) error {
	raw, err := c.Call(ctx, "POST", api.Prefix+"/flow/keys/"+url.PathEscape(key)+"/"+action, map[string]string{"reason": reason}, nil)
	if err != nil || printed(o, raw) {
		return err
	}
	fmt.Fprintf(o.Out, "key %s: %s\n", key, action)
	return nil
}

// LimitsList prints the flow limits.
func LimitsList(ctx context.Context, c *APIClient, o *AdminOpts) error {
	var page api.Page[*api.FlowLimit]
	raw, err := c.Call(ctx, "GET", api.Prefix+"/flow/limits", nil, &page)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, l := range page.Data {
		rows = append(rows, []string{l.Pattern, l.Queue, strconv.FormatFloat(l.Rate, 'f', -1, 64), strconv.Itoa(l.MaxRunning),
			strconv.Itoa(l.BreakerFailures), l.BreakerCooldown, strconv.Itoa(l.AutoPauseFailures), l.UpdatedBy})
	}
	table(o.Out, "PATTERN\tQUEUE\tRATE\tMAX RUNNING\tBREAKER\tCOOLDOWN\tAUTOPAUSE\tBY", rows)
	return nil
}

// LimitSet creates or replaces a limit.
func LimitSet(ctx context.Context, c *APIClient, o *AdminOpts, l *api.FlowLimit) error {
	raw, err := c.Call(ctx, "PUT", api.Prefix+"/flow/limits", l, nil)
	if err != nil || printed(o, raw) {
		return err
	}
	fmt.Fprintf(o.Out, "limit %s set\n", l.Pattern)
	return nil
}

// LimitDelete removes a limit.
func LimitDelete(ctx context.Context, c *APIClient, o *AdminOpts, pattern, queue, reason string) error {
	_, err := c.Call(ctx, "DELETE", api.Prefix+"/flow/limits", map[string]string{"pattern": pattern, "queue": queue, "reason": reason}, nil)
	if err == nil && !o.JSON {
		fmt.Fprintf(o.Out, "limit %s deleted\n", pattern)
	}
	return err
}

// AuditList prints one page of the audit log, newest first.
func AuditList(ctx context.Context, c *APIClient, o *AdminOpts, actor, action, target string, limit int, cursor string) error {
	q := url.Values{}
	for k, v := range map[string]string{"actor": actor, "action": action, "target": target, "after": cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var page api.Page[*api.Audit]
	raw, err := c.Call(ctx, "GET", api.Prefix+"/audit?"+q.Encode(), nil, &page)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, a := range page.Data {
		rows = append(rows, []string{strconv.FormatInt(a.ID, 10), ts(a.At), a.Actor, a.Action, a.Target, short(a.Reason, 50)})
	}
	table(o.Out, "ID\tAT\tACTOR\tACTION\tTARGET\tREASON", rows)
	nextHint(o, page.NextCursor)
	return nil
}

// TokensCreate creates a token and prints its secret once.
func TokensCreate(ctx context.Context, c *APIClient, o *AdminOpts, name, role string) error {
	var t api.CreatedToken
	raw, err := c.Call(ctx, "POST", api.Prefix+"/tokens", map[string]string{"name": name, "role": role}, &t)
	if err != nil || printed(o, raw) {
		return err
	}
	fmt.Fprintf(o.Out, "token %d %q (%s) created. It is shown only now; store it safely:\n%s\n", t.ID, t.Name, t.Role, t.Secret)
	return nil
}

// TokensRevoke revokes a token and ends its console sessions.
func TokensRevoke(ctx context.Context, c *APIClient, o *AdminOpts, id, reason string) error {
	raw, err := c.Call(ctx, "DELETE", api.Prefix+"/tokens/"+url.PathEscape(id), map[string]string{"reason": reason}, nil)
	if err != nil || printed(o, raw) {
		return err
	}
	fmt.Fprintf(o.Out, "token %s revoked\n", id)
	return nil
}

// TokensList prints every token (never secrets).
func TokensList(ctx context.Context, c *APIClient, o *AdminOpts) error {
	var all []*auth.Token
	cursor := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(api.MaxLimit)}}
		if cursor != "" {
			q.Set("after", cursor)
		}
		var page api.Page[*auth.Token]
		if _, err := c.Call(ctx, "GET", api.Prefix+"/tokens?"+q.Encode(), nil, &page); err != nil {
			return err
		}
		all = append(all, page.Data...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if o.JSON {
		return jsonOut(o.Out, all)
	}
	var rows [][]string
	for _, t := range all {
		state, used := "active", "never"
		if t.RevokedAt != nil {
			state = "revoked " + ts(*t.RevokedAt)
		}
		if t.LastUsedAt != nil {
			used = ts(*t.LastUsedAt)
		}
		rows = append(rows, []string{strconv.FormatInt(t.ID, 10), t.Name, t.Role, ts(t.CreatedAt), t.CreatedBy, used, state})
	}
	table(o.Out, "ID\tNAME\tROLE\tCREATED\tBY\tLAST USED\tSTATE", rows)
	return nil
}
