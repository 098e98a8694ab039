// Package modcli is what a module's command-line verbs are given by the
// `keel` binary: a caller of the running server's API (authenticated with
// the operator's token), the output streams and the --json switch, and the
// few printing rules every verb follows (tables, times, page hints), so that
// a module's verbs live in the module, speak its own words, and read like
// the engine's.
//
// A module lists its verbs in its Descriptor (module.Descriptor.Commands);
// each verb's RunE hands its work to the Runner it was given:
//
//	func Commands(run modcli.Runner) []*cobra.Command {
//		list := &cobra.Command{Use: "list", RunE: func(cmd *cobra.Command, _ []string) error {
//			return run(cmd, func(ctx context.Context, e *modcli.Env) error { return List(ctx, e) })
//		}}
//		return []*cobra.Command{{Use: "notes", Short: "…"}, …}
//	}
package modcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// Caller sends one request to the server's API: in (if not nil) as JSON,
// the answer decoded into out (if not nil); raw is the answer's body. A
// problem answer is an error whose ProblemCode method names its code.
type Caller interface {
	Call(ctx context.Context, method, path string, in, out any) (raw []byte, err error)
}

// Streamer is a Caller that can also hand over an answer's body as it
// arrives, for a download too large to hold: body must be closed; size is
// the body's length (-1 when unknown). A problem answer is an error, as
// from Call.
type Streamer interface {
	Stream(ctx context.Context, method, path string) (body io.ReadCloser, size int64, err error)
}

// Env is what one verb runs with.
type Env struct {
	API Caller
	// JSON asks for the server's JSON as it came, instead of tables.
	JSON bool
	Out  io.Writer
	Err  io.Writer // hints (the next page's cursor) and warnings
}

// Runner runs a verb's work with an Env built from the command's flags
// (--server, the token from the environment, --json).
type Runner func(cmd *cobra.Command, work func(ctx context.Context, e *Env) error) error

// Group is a module's verb group ("reservations"): without a verb it shows
// its help; an unknown verb is an error naming the known ones (and a
// non-zero exit), not the help with success.
func Group(use, short string, verbs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{Use: use, Short: short, Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			var names []string
			for _, v := range cmd.Commands() {
				if v.IsAvailableCommand() {
					names = append(names, v.Name())
				}
			}
			return fmt.Errorf("unknown verb %q for keel %s (one of %s)", args[0], cmd.Name(), strings.Join(names, ", "))
		}}
	g.AddCommand(verbs...)
	return g
}

// Page is one page of a list answer (the API's list envelope).
type Page[T any] struct {
	Data       []T    `json:"data"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Printed prints raw and reports true in JSON mode; a verb then stops.
func (e *Env) Printed(raw []byte) bool {
	if e.JSON {
		fmt.Fprintln(e.Out, strings.TrimSpace(string(raw)))
	}
	return e.JSON
}

// AfterHint tells how to ask for the next page, if there is one.
func (e *Env) AfterHint(next string) {
	if next != "" && e.Err != nil {
		fmt.Fprintf(e.Err, "more: --after %s\n", next)
	}
}

// Table prints rows under a tab-separated header, aligned.
func Table(w io.Writer, header string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

// Fields prints name/value rows, aligned.
func Fields(w io.Writer, rows [][]string) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

// TS prints a time in the operator's local zone, to the second, naming
// the zone by its offset ("2026-12-03 22:21:52 UTC", "… UTC+8"): a table
// pasted into a ticket or read over a shoulder in another office says
// which hour it means. An offset, not the zone's abbreviation: "CST" is
// China's and also America's Central time.
func TS(t time.Time) string {
	l := t.Local()
	return l.Format("2006-01-02 15:04:05") + " " + offsetName(l)
}

// offsetName is t's offset from UTC as "UTC", "UTC+8", "UTC-3:30".
func offsetName(t time.Time) string {
	_, off := t.Zone()
	if off == 0 {
		return "UTC"
	}
	sign := "+"
	if off < 0 {
		sign, off = "-", -off
	}
	if m := off % 3600 / 60; m != 0 {
		return fmt.Sprintf("UTC%s%d:%02d", sign, off/3600, m)
	}
	return fmt.Sprintf("UTC%s%d", sign, off/3600)
}

// OptTS prints an optional time, or "-".
func OptTS(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return TS(*t)
}

// Short cuts s to n characters, marking the cut.
func Short(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// PageQuery adds a page's size and cursor to q.
func PageQuery(q url.Values, limit int, after string) {
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if after != "" {
		q.Set("after", after)
	}
}

// PositiveID checks an id before anything is sent, so that a typo gets a
// plain answer rather than an API problem.
func PositiveID(what, id string) error {
	if n, err := strconv.ParseInt(id, 10, 64); err != nil || n < 1 {
		return fmt.Errorf("%s ID must be a positive integer, got %q", what, id)
	}
	return nil
}

// ProblemCode is the stable code of a problem answer ("" for any other
// error).
func ProblemCode(err error) string {
	var p interface{ ProblemCode() string }
	if errors.As(err, &p) {
		return p.ProblemCode()
	}
	return ""
}

// NotFound names the object when the API does not know it: the engine's
// not_found and a module's own "<thing>_not_found" codes alike become
// "no payment NOPE000001 (payment_not_found)", a sentence with the stable
// code scripts match on, instead of the problem's terse detail. The
// problem stays wrapped (errors.As finds it).
func NotFound(what, id string, err error) error {
	if c := ProblemCode(err); c == "not_found" || strings.HasSuffix(c, "_not_found") {
		return &notFoundError{msg: fmt.Sprintf("no %s %s (%s)", what, id, c), err: err}
	}
	return err
}

type notFoundError struct {
	msg string
	err error
}

func (e *notFoundError) Error() string { return e.msg }
func (e *notFoundError) Unwrap() error { return e.err }
