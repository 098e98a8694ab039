package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module/modcli"
	"github.com/keelwork/keel/server/api"
)

// BatchFilter selects batches for `keel batches list`.
type BatchFilter struct {
	States []string
	Kind   string
	Limit  int
	After  string
}

func (f *BatchFilter) query() (url.Values, error) {
	q := url.Values{}
	for _, s := range f.States {
		if !api.ValidBatchState(keeltype.BatchState(s)) {
			return nil, fmt.Errorf("unknown batch state %q (one of %s)", s, batchStateNames())
		}
	}
	if len(f.States) > 0 {
		q.Set("state", strings.Join(f.States, ","))
	}
	if f.Kind != "" {
		q.Set("kind", f.Kind)
	}
	pageQuery(q, f.Limit, f.After)
	return q, nil
}

// ItemFilter selects the items of one batch for `keel batches items`.
type ItemFilter struct {
	Outcome string
	// Key is an item's subject: its record's key in the module.
	Key   string
	Text  string
	Limit int
	After string
}

func (f *ItemFilter) query() (url.Values, error) {
	q := url.Values{}
	if f.Outcome != "" {
		if !api.ValidBatchOutcome(keeltype.BatchOutcome(f.Outcome)) {
			return nil, fmt.Errorf("unknown outcome %q (one of %s)", f.Outcome, outcomeNames())
		}
		q.Set("outcome", f.Outcome)
	}
	if f.Key != "" {
		q.Set("subject", f.Key)
	}
	if f.Text != "" {
		q.Set("text", f.Text)
	}
	pageQuery(q, f.Limit, f.After)
	return q, nil
}

func pageQuery(q url.Values, limit int, after string) { modcli.PageQuery(q, limit, after) }

func afterHint(o *AdminOpts, next string) {
	if next != "" && o.Err != nil {
		fmt.Fprintf(o.Err, "more: --after %s\n", next)
	}
}

// batchPath checks id before anything is sent, so that a typo gets a plain
// answer rather than an API problem.
func batchPath(id string) (string, error) {
	if n, err := strconv.ParseInt(id, 10, 64); err != nil || n < 1 {
		return "", fmt.Errorf("batch ID must be a positive integer, got %q", id)
	}
	return api.Prefix + "/batches/" + id, nil
}

// batchErr names the batch when the API does not know it.
func batchErr(id string, err error) error {
	var p *ProblemError
	if errors.As(err, &p) && p.Code == api.CodeNotFound {
		return fmt.Errorf("no batch %s: %w", id, err)
	}
	return err
}

// checkBatchReason applies the engine's rule up front: batch actions are
// audited and need a reason of keel.MinBatchReasonRunes characters.
func checkBatchReason(reason string) error {
	if utf8.RuneCountInString(strings.TrimSpace(reason)) < keel.MinBatchReasonRunes {
		return fmt.Errorf("--reason is required: at least %d characters saying why (it goes to the audit log)",
			keel.MinBatchReasonRunes)
	}
	return nil
}

// BatchesList prints one page of batches, newest first.
func BatchesList(ctx context.Context, c *APIClient, o *AdminOpts, f *BatchFilter) error {
	q, err := f.query()
	if err != nil {
		return err
	}
	var page api.Page[*api.Batch]
	raw, err := c.Call(ctx, "GET", api.Prefix+"/batches?"+q.Encode(), nil, &page)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, b := range page.Data {
		rows = append(rows, []string{strconv.FormatInt(b.ID, 10), b.Kind, short(b.Name, 30), batchStateText(b),
			progressText(b.Progress), ts(b.CreatedAt), b.CreatedBy})
	}
	table(o.Out, "ID\tKIND\tNAME\tSTATE\tPROGRESS\tCREATED\tOPERATOR", rows)
	afterHint(o, page.NextCursor)
	return nil
}

// BatchItems prints one page of a batch's items in subject order.
func BatchItems(ctx context.Context, c *APIClient, o *AdminOpts, id string, f *ItemFilter) error {
	path, err := batchPath(id)
	if err != nil {
		return err
	}
	q, err := f.query()
	if err != nil {
		return err
	}
	var page api.Page[*api.BatchItem]
	raw, err := c.Call(ctx, "GET", path+"/items?"+q.Encode(), nil, &page)
	if err != nil || printed(o, raw) {
		return batchErr(id, err)
	}
	var rows [][]string
	for _, it := range page.Data {
		j := it.Job
		rows = append(rows, []string{it.Subject, outcomeWord(it.Outcome), strconv.FormatInt(j.ID, 10),
			fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts), moduleKey(j), short(itemWhy(it), 60)})
	}
	table(o.Out, "SUBJECT\tOUTCOME\tJOB\tATTEMPT\tKEY\tWHY", rows)
	afterHint(o, page.NextCursor)
	return nil
}

// moduleKey is the item's flow key without the batch's prefix ("app:42").
func moduleKey(j *api.Job) string {
	return strings.TrimPrefix(j.FlowKey, keel.BatchKeyPrefix(j.BatchID))
}

// batchActionWords are the past tenses printed after an action.
var batchActionWords = map[string]string{"pause": "paused", "resume": "resumed", "terminate": "terminated"}

// BatchAction pauses, resumes or terminates a batch (audited with reason).
func BatchAction(ctx context.Context, c *APIClient, o *AdminOpts, action, id, reason string) error {
	path, err := batchPath(id)
	if err != nil {
		return err
	}
	if err := checkBatchReason(reason); err != nil {
		return err
	}
	var b api.Batch
	raw, err := c.Call(ctx, "POST", path+"/"+action, map[string]string{"reason": reason}, &b)
	if err != nil || printed(o, raw) {
		return batchErr(id, err)
	}
	fmt.Fprintf(o.Out, "batch %d %s (now %s)\n", b.ID, batchActionWords[action], batchStateText(&b))
	if action == "terminate" {
		fmt.Fprintf(o.Out, "%d item(s) never started are unprocessed; items already started finish on their own\n",
			b.Counts[keeltype.OutcomeUnprocessed])
	}
	return nil
}

// BatchKeyResume resumes one paused flow key of a batch; key is the
// module's key ("app:42").
func BatchKeyResume(ctx context.Context, c *APIClient, o *AdminOpts, id, key, reason string) error {
	path, err := batchPath(id)
	if err != nil {
		return err
	}
	if err := checkBatchReason(reason); err != nil {
		return err
	}
	var k api.BatchKey
	raw, err := c.Call(ctx, "POST", path+"/keys/"+url.PathEscape(key)+"/resume", map[string]string{"reason": reason}, &k)
	if err != nil || printed(o, raw) {
		return batchErr(id, err)
	}
	fmt.Fprintf(o.Out, "batch %s key %s resumed\n", id, k.Key)
	return nil
}
