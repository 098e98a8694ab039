package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/server/api"
)

// Exit statuses of `keel batches watch` (1 stays any other error).
const (
	ExitCompleted   = 0
	ExitPartial     = 3
	ExitTerminated  = 4
	ExitInterrupted = 130 // the shell's status for SIGINT
)

// ExitError ends the keel command with Code rather than 1. The verb has
// already printed what happened, so main adds nothing.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// WatchExit is the command's result for a batch in its final state s.
func WatchExit(s keeltype.BatchState) error {
	switch s {
	case keeltype.BatchPartialCompleted:
		return &ExitError{Code: ExitPartial}
	case keeltype.BatchTerminated:
		return &ExitError{Code: ExitTerminated}
	}
	return nil
}

// BatchWatch reads the batch every interval and redraws its progress on
// one line of o.Err (with --json: one JSON line on o.Out whenever it
// changed) until the batch reaches a final state; then it prints a summary
// and returns WatchExit. Cancelling ctx (Ctrl-C) stops the watching, never
// the batch, and returns ExitInterrupted.
func BatchWatch(ctx context.Context, c *APIClient, o *AdminOpts, id string, interval time.Duration) error {
	path, err := batchPath(id)
	if err != nil {
		return err
	}
	if interval <= 0 {
		return fmt.Errorf("--interval must be positive, got %s", interval)
	}
	w := &watcher{c: c, o: o, id: id, path: path, line: &statusLine{w: o.Err}}
	if !o.JSON {
		fmt.Fprintf(o.Err, "watching batch %s every %s; Ctrl-C stops watching, not the batch\n", id, interval)
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		b, raw, err := w.read(ctx)
		if err != nil {
			return err
		}
		if err := w.show(b, raw); err != nil {
			return err
		}
		if b.State.Final() {
			return w.finish(b)
		}
		select {
		case <-ctx.Done():
			return w.stopped()
		case <-tick.C:
		}
	}
}

// watcher draws what one watch sees.
type watcher struct {
	c        *APIClient
	o        *AdminOpts
	id, path string
	line     *statusLine
	last     string // the state and counters of the last JSON line
	seen     *api.Batch
}

// read fetches the batch; a cancelled ctx means Ctrl-C, not a failure.
func (w *watcher) read(ctx context.Context) (*api.Batch, []byte, error) {
	var b api.Batch
	raw, err := w.c.Call(ctx, "GET", w.path, nil, &b)
	switch {
	case ctx.Err() != nil:
		return nil, nil, w.stopped()
	case err != nil:
		w.line.end()
		return nil, nil, batchErr(w.id, err)
	}
	return &b, raw, nil
}

func (w *watcher) show(b *api.Batch, raw []byte) error {
	w.seen = b
	if !w.o.JSON {
		w.line.draw(progressLine(b, 30) + "  " + countsText(b.Counts) + "  " + batchStateText(b))
		return nil
	}
	sig := fmt.Sprint(b.State, b.Counts)
	if sig == w.last {
		return nil
	}
	w.last = sig
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return fmt.Errorf("reading batch %d: %w", b.ID, err)
	}
	_, err := fmt.Fprintln(w.o.Out, buf.String())
	return err
}

func (w *watcher) finish(b *api.Batch) error {
	w.line.end()
	if !w.o.JSON {
		fmt.Fprintln(w.o.Out, summary(b))
	}
	return WatchExit(b.State)
}

func (w *watcher) stopped() error {
	w.line.end()
	state := "unknown"
	if w.seen != nil {
		state = batchStateText(w.seen)
	}
	fmt.Fprintf(w.o.Err, "stopped watching batch %s (last seen %s); the batch itself was not touched\n", w.id, state)
	return &ExitError{Code: ExitInterrupted}
}

// progressLine is "[bar] done/total pct rate eta".
func progressLine(b *api.Batch, width int) string {
	p := b.Progress
	s := fmt.Sprintf("%s %d/%d %.1f%%  %.2f/s", bar(p.Done, p.Total, width), p.Done, p.Total, p.Percent, p.Rate)
	if eta := time.Duration(p.ETASeconds * float64(time.Second)).Round(time.Second); eta > 0 && !b.State.Final() {
		s += "  eta " + eta.String()
	}
	return s
}

// countsText names the counters an operator watches for trouble.
func countsText(counts map[keeltype.BatchOutcome]int64) string {
	return fmt.Sprintf("failed %d  skipped %d  waiting %d", counts[keeltype.OutcomeFailed],
		counts[keeltype.OutcomeSkipped], waiting(counts))
}

// summary is the line printed once the batch ended.
func summary(b *api.Batch) string {
	c := b.Counts
	s := fmt.Sprintf("batch %d %s: %d/%d items done; success %d, failed %d, skipped %d, unprocessed %d",
		b.ID, batchStateWord(b.State), b.Progress.Done, b.Progress.Total, c[keeltype.OutcomeSuccess],
		c[keeltype.OutcomeFailed], c[keeltype.OutcomeSkipped], c[keeltype.OutcomeUnprocessed])
	if b.StartedAt != nil && b.CompletedAt != nil {
		s += fmt.Sprintf(" (took %s)", b.CompletedAt.Sub(*b.StartedAt).Round(time.Second))
	}
	return s
}

// statusLine redraws one terminal line in place: carriage return, the new
// text, and blanks over what is left of a longer previous text.
type statusLine struct {
	w     io.Writer
	width int
}

func (l *statusLine) draw(s string) {
	n := utf8.RuneCountInString(s)
	fmt.Fprintf(l.w, "\r%s%s", s, strings.Repeat(" ", max(l.width-n, 0)))
	l.width = n
}

// end moves below the line, if one was drawn.
func (l *statusLine) end() {
	if l.width > 0 {
		fmt.Fprintln(l.w)
		l.width = 0
	}
}
