package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module/modcli"
	"github.com/keelwork/keel/server/api"
)

// BatchDetail is what `keel batches get` shows: the API's batch plus the
// reasons of its skipped items, which the counters do not hold.
type BatchDetail struct {
	*api.Batch
	// SkipReasons counts skipped items per reason code.
	SkipReasons map[string]int64 `json:"skip_reasons,omitempty"`
}

// detailOrder is the order of the counters: how it ended, what is parked,
// what is still to do.
var detailOrder = []keeltype.BatchOutcome{keeltype.OutcomeSuccess, keeltype.OutcomeFailed, keeltype.OutcomeSkipped,
	keeltype.OutcomeWaitingConnection, keeltype.OutcomeWaitingExternalACK, keeltype.OutcomeWaitingACK,
	keeltype.OutcomeWaiting, keeltype.OutcomeProcessing, keeltype.OutcomeQueued, keeltype.OutcomeUnprocessed}

// BatchGet prints a batch: its definition, progress, counters per item
// outcome (skips by reason) and paused flow keys.
func BatchGet(ctx context.Context, c *APIClient, o *AdminOpts, id string) error {
	d, err := readBatchDetail(ctx, c, id)
	if err != nil {
		return err
	}
	if o.JSON {
		return jsonOut(o.Out, d)
	}
	printBatchHead(o.Out, d.Batch)
	printCounts(o.Out, d)
	printPausedKeys(o.Out, d.Batch)
	return nil
}

func readBatchDetail(ctx context.Context, c *APIClient, id string) (*BatchDetail, error) {
	path, err := batchPath(id)
	if err != nil {
		return nil, err
	}
	var b api.Batch
	if _, err := c.Call(ctx, "GET", path, nil, &b); err != nil {
		return nil, batchErr(id, err)
	}
	d := &BatchDetail{Batch: &b}
	if b.Counts[keeltype.OutcomeSkipped] > 0 {
		d.SkipReasons, err = skipReasons(ctx, c, path)
	}
	return d, err
}

// skipReasons pages through every skipped item and counts its reason.
func skipReasons(ctx context.Context, c *APIClient, path string) (map[string]int64, error) {
	reasons := map[string]int64{}
	q := url.Values{"outcome": {string(keeltype.OutcomeSkipped)}, "limit": {strconv.Itoa(api.MaxLimit)}}
	for {
		var page api.Page[*api.BatchItem]
		if _, err := c.Call(ctx, "GET", path+"/items?"+q.Encode(), nil, &page); err != nil {
			return nil, fmt.Errorf("reading the skipped items: %w", err)
		}
		for _, it := range page.Data {
			reasons[cmp.Or(itemWhy(it), "(no reason given)")]++
		}
		if page.NextCursor == "" {
			return reasons, nil
		}
		q.Set("cursor", page.NextCursor)
	}
}

func printBatchHead(w io.Writer, b *api.Batch) {
	fmt.Fprintf(w, "batch %d  %s  %q\n", b.ID, b.Kind, b.Name)
	rows := [][]string{
		{"state", batchStateText(b)},
		{"reason", b.Reason},
		{"created", ts(b.CreatedAt) + " by " + b.CreatedBy},
		{"snapshot", ts(b.SnapshotAt) + "  filter " + string(b.Filter)},
		{"pace", paceText(b)},
		{"progress", progressLine(b, 20)},
	}
	if b.Pause != nil && b.Pause.Note != "" {
		rows = append(rows, []string{"paused because", b.Pause.Note})
	}
	if b.CompletedAt != nil {
		rows = append(rows, []string{"ended", ts(*b.CompletedAt)})
	}
	if b.LastError != "" {
		rows = append(rows, []string{"last error", b.LastError})
	}
	fields(w, rows)
}

// paceText says how the batch is throttled: queue, rate per key and when a
// failing key pauses (zero disables either).
func paceText(b *api.Batch) string {
	rate, pause := "no rate limit", "keys never pause on failures"
	if b.RatePerKey > 0 {
		rate = strconv.FormatFloat(b.RatePerKey, 'f', -1, 64) + " item(s)/s per key"
	}
	if b.AutoPauseFailures > 0 {
		pause = fmt.Sprintf("a key pauses after %d failures in a row", b.AutoPauseFailures)
	}
	if b.PauseOnKeyPause {
		pause += ", and the whole batch with it"
	}
	return fmt.Sprintf("queue %s, %s, %s", b.Queue, rate, pause)
}

func printCounts(w io.Writer, d *BatchDetail) {
	var rows [][]string
	for _, o := range detailOrder {
		rows = append(rows, []string{outcomeWord(o), strconv.FormatInt(d.Counts[o], 10)})
		if o == keeltype.OutcomeSkipped {
			rows = append(rows, reasonRows(d.SkipReasons)...)
		}
	}
	fmt.Fprintln(w)
	table(w, "OUTCOME\tITEMS", rows)
}

// reasonRows lists skip reasons, most frequent first.
func reasonRows(reasons map[string]int64) [][]string {
	codes := make([]string, 0, len(reasons))
	for code := range reasons {
		codes = append(codes, code)
	}
	slices.SortFunc(codes, func(a, b string) int {
		return cmp.Or(cmp.Compare(reasons[b], reasons[a]), strings.Compare(a, b))
	})
	var rows [][]string
	for _, code := range codes {
		rows = append(rows, []string{"  because " + code, strconv.FormatInt(reasons[code], 10)})
	}
	return rows
}

func printPausedKeys(w io.Writer, b *api.Batch) {
	if len(b.PausedKeys) == 0 {
		return
	}
	var rows [][]string
	for _, k := range b.PausedKeys {
		since := ""
		if k.PausedAt != nil {
			since = ts(*k.PausedAt)
		}
		rows = append(rows, []string{k.Key, since, strconv.Itoa(k.ConsecutiveFailures), short(k.PauseReason, 40),
			short(k.LastError, 50)})
	}
	fmt.Fprintln(w)
	table(w, "PAUSED KEY\tSINCE\tFAILURES\tWHY\tLAST ERROR", rows)
	fmt.Fprintf(w, "resume one with: keel batches resume-key %d KEY --reason TEXT\n", b.ID)
}

// fields prints label/value rows aligned, without a header.
func fields(w io.Writer, rows [][]string) { modcli.Fields(w, rows) }
