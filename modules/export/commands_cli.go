package export

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelwork/keel/module/modcli"
)

func verb(run modcli.Runner, work func(ctx context.Context, e *modcli.Env, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return run(cmd, func(ctx context.Context, e *modcli.Env) error { return work(ctx, e, args) })
	}
}

var cliStates = map[string]string{StateRunning: "exporting", StateMerging: "merging and verifying", StateSucceeded: "done",
	StateFailed: "failed", StateCancelled: "cancelled", StateQuarantined: "quarantined (needs an operator)"}

func cliState(s string) string {
	if w, ok := cliStates[s]; ok {
		return w
	}
	return s
}

// bar is a text progress bar: [#####.....]  50.0%.
func bar(f float64) string {
	const w = 30
	n := int(f*w + 0.5)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", w-n) + "] " + fmt.Sprintf("%5.1f%%", f*100)
}

func taskPath(id string) (string, error) {
	if err := modcli.PositiveID("export", id); err != nil {
		return "", err
	}
	return apiPrefix + "/" + id, nil
}

func createCmd(run modcli.Runner) *cobra.Command {
	var req Request
	var columns, status string
	var wait bool
	cmd := &cobra.Command{Use: "create", Short: "Create an export (or get the same request's task); --wait shows a progress bar until it ends",
		Args: cobra.NoArgs,
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, _ []string) error {
			if columns != "" {
				req.Columns = strings.Split(columns, ",")
			}
			if status != "" {
				req.Filters = map[string]string{"status": status}
			}
			if _, err := normalize(req); err != nil {
				return fmt.Errorf("refused before sending: %s", strings.TrimPrefix(err.Error(), strings.SplitN(err.Error(), ": ", 2)[0]+": "))
			}
			var v TaskView
			raw, err := e.API.Call(ctx, "POST", apiPrefix, req, &v)
			if err != nil {
				return err
			}
			if !wait && e.Printed(raw) {
				return nil
			}
			if v.Existing {
				fmt.Fprintf(e.Out, "export %d already exists for this request (%s)\n", v.ID, cliState(v.State))
			} else {
				fmt.Fprintf(e.Out, "export %d created: %d rows in %d shards\n", v.ID, v.EstimatedRows, v.ShardCount)
			}
			if wait {
				return watch(ctx, e, strconv.FormatInt(v.ID, 10))
			}
			return nil
		})}
	cmd.Flags().StringVar(&req.Tenant, "tenant", "", "tenant whose orders to export (required)")
	cmd.Flags().StringVar(&columns, "columns", "", "comma-separated columns (default all): "+strings.Join(Columns, ","))
	cmd.Flags().StringVar(&status, "status", "", "only orders in this status (paid, shipped, refunded)")
	cmd.Flags().StringVar(&req.Format, "format", "csv", "csv or xlsx")
	cmd.Flags().BoolVar(&req.Gzip, "gzip", false, "gzip the file")
	cmd.Flags().BoolVar(&req.BOM, "bom", false, "start a CSV with a UTF-8 byte order mark (for Excel)")
	cmd.Flags().BoolVar(&req.NewVersion, "new-version", false, "create a new task even if the same request has one")
	cmd.Flags().BoolVar(&wait, "wait", false, "show a progress bar until the export ends")
	return cmd
}

// watch polls the task and redraws its progress bar until it ends.
func watch(ctx context.Context, e *modcli.Env, id string) error {
	p, err := taskPath(id)
	if err != nil {
		return err
	}
	for {
		var v TaskView
		if _, err := e.API.Call(ctx, "GET", p, nil, &v); err != nil {
			return err
		}
		fmt.Fprintf(e.Out, "\r%s %d/%d rows  %s   ", bar(v.Progress), v.RowsDone, v.EstimatedRows, cliState(v.State))
		switch v.State {
		case StateSucceeded:
			fmt.Fprintf(e.Out, "\nverified: %s, sha256 %s\n", v.Verdict, v.ObjectSHA256)
			return nil
		case StateFailed, StateCancelled, StateQuarantined:
			fmt.Fprintln(e.Out)
			return fmt.Errorf("export %s ended %s: %s", id, cliState(v.State), v.Error)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func listCmd(run modcli.Runner) *cobra.Command {
	var tenant string
	cmd := &cobra.Command{Use: "list", Short: "List exports, newest first", Args: cobra.NoArgs,
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, _ []string) error {
			path := apiPrefix + "?limit=50"
			if tenant != "" {
				path += "&tenant=" + tenant
			}
			var page modcli.Page[TaskView]
			raw, err := e.API.Call(ctx, "GET", path, nil, &page)
			if err != nil || e.Printed(raw) {
				return err
			}
			if len(page.Data) == 0 {
				fmt.Fprintln(e.Out, "no exports")
				return nil
			}
			var rows [][]string
			for _, v := range page.Data {
				rows = append(rows, []string{strconv.FormatInt(v.ID, 10), v.Tenant, v.User, v.Format, cliState(v.State), bar(v.Progress), modcli.TS(v.CreatedAt)})
			}
			modcli.Table(e.Out, "ID\tTENANT\tUSER\tFORMAT\tSTATE\tPROGRESS\tCREATED", rows)
			return nil
		})}
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant's exports")
	return cmd
}

func showCmd(run modcli.Runner) *cobra.Command {
	var follow bool
	cmd := &cobra.Command{Use: "show ID", Short: "Show an export with its shards (--watch: a progress bar until it ends)", Args: cobra.ExactArgs(1),
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, args []string) error {
			if follow {
				return watch(ctx, e, args[0])
			}
			p, err := taskPath(args[0])
			if err != nil {
				return err
			}
			var v TaskView
			raw, err := e.API.Call(ctx, "GET", p, nil, &v)
			if err != nil {
				return modcli.NotFound("export", args[0], err)
			}
			if e.Printed(raw) {
				return nil
			}
			modcli.Fields(e.Out, [][]string{{"export", strconv.FormatInt(v.ID, 10)}, {"state", cliState(v.State)},
				{"progress", bar(v.Progress)}, {"rows", fmt.Sprintf("%d / %d", v.RowsDone, v.EstimatedRows)},
				{"data version", strconv.FormatInt(v.DataVersion, 10)}, {"verdict", v.Verdict}, {"sha256", v.ObjectSHA256}})
			var rows [][]string
			for _, s := range v.Shards {
				rows = append(rows, []string{strconv.Itoa(s.No), fmt.Sprintf("(%d, %d]", s.Lo, s.Hi), s.State, strconv.FormatInt(s.Fence, 10),
					strconv.FormatInt(s.Rows, 10), strconv.Itoa(s.StaleRefused), s.Settled})
			}
			modcli.Table(e.Out, "SHARD\tRANGE\tSTATE\tFENCE\tROWS\tSTALE REFUSED\tSETTLED", rows)
			return nil
		})}
	cmd.Flags().BoolVar(&follow, "watch", false, "redraw a progress bar until the export ends")
	return cmd
}

func cancelCmd(run modcli.Runner, what string) *cobra.Command {
	var reason string
	cmd := &cobra.Command{Use: what + " ID", Short: map[string]string{"cancel": "Cancel a running export (audited)", "retry": "Retry a failed export from its committed cursors (audited)"}[what],
		Args: cobra.ExactArgs(1),
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, args []string) error {
			p, err := taskPath(args[0])
			if err != nil {
				return err
			}
			if len([]rune(strings.TrimSpace(reason))) < 5 {
				return fmt.Errorf("--reason is required: at least 5 characters saying why (it goes to the audit log)")
			}
			var v TaskView
			raw, err := e.API.Call(ctx, "POST", p+"/"+what, reasonBody{Reason: reason}, &v)
			if err != nil || e.Printed(raw) {
				return err
			}
			fmt.Fprintf(e.Out, "export %d: %s\n", v.ID, cliState(v.State))
			return nil
		})}
	cmd.Flags().StringVar(&reason, "reason", "", "why, at least 5 characters (goes to the audit log)")
	return cmd
}

func downloadCmd(run modcli.Runner) *cobra.Command {
	var out string
	cmd := &cobra.Command{Use: "download ID", Short: "Download an export's file as it arrives, with a progress bar, and check its SHA-256", Args: cobra.ExactArgs(1),
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, args []string) error {
			p, err := taskPath(args[0])
			if err != nil {
				return err
			}
			if out == "" {
				return fmt.Errorf("--out is required: the file to write, or - for standard output")
			}
			var v TaskView
			if _, err := e.API.Call(ctx, "GET", p, nil, &v); err != nil {
				return modcli.NotFound("export", args[0], err)
			}
			return download(ctx, e, p+"/download", v.Task, out)
		})}
	cmd.Flags().StringVarP(&out, "out", "o", "", "file to write, or - for standard output (the progress bar then goes to standard error)")
	return cmd
}

// download streams the file at path to out (a file, or - for e.Out)
// through its SHA-256, drawing a progress bar on e.Err; nothing beyond a
// copy buffer is held. A file is written beside out and renamed into place
// only once its digest matches the task's: a mismatch leaves no file.
// Standard output cannot be taken back, so there a mismatch is an error
// saying so.
func download(ctx context.Context, e *modcli.Env, path string, t *Task, out string) error {
	var body io.ReadCloser
	size := int64(-1)
	if s, ok := e.API.(modcli.Streamer); ok {
		var err error
		if body, size, err = s.Stream(ctx, "GET", path); err != nil {
			return err
		}
	} else {
		raw, err := e.API.Call(ctx, "GET", path, nil, nil)
		if err != nil {
			return err
		}
		body, size = io.NopCloser(bytes.NewReader(raw)), int64(len(raw))
	}
	defer body.Close()
	total := t.ObjectBytes
	if size >= 0 {
		total = size
	}
	bar := &progressBar{w: e.Err, total: total, shown: -1}
	if bar.w == nil {
		bar.w = io.Discard
	}
	h := sha256.New()
	var dst io.Writer = e.Out
	var tmp *os.File
	if out != "-" {
		var err error
		if tmp, err = os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".part-*"); err != nil {
			return fmt.Errorf("cannot write beside %s: %w", out, err)
		}
		defer func() {
			if tmp != nil {
				_ = tmp.Close()
				_ = os.Remove(tmp.Name())
			}
		}()
		dst = tmp
	}
	n, err := io.Copy(io.MultiWriter(dst, h, bar), body)
	bar.end()
	if err != nil {
		return fmt.Errorf("the download of export %d broke off after %d bytes: %w", t.ID, n, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if sum != t.ObjectSHA256 {
		if tmp == nil {
			return fmt.Errorf("the %d bytes written to standard output have SHA-256 %s, not the export's %s: discard them", n, sum, t.ObjectSHA256)
		}
		return fmt.Errorf("the downloaded file's SHA-256 %s is not the export's %s: not written", sum, t.ObjectSHA256)
	}
	if tmp == nil {
		fmt.Fprintf(bar.w, "%d bytes, sha256 %s (verified)\n", n, sum)
		return nil
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	tmp = nil
	fmt.Fprintf(e.Out, "wrote %s: %d bytes, sha256 %s (verified)\n", out, n, sum)
	return nil
}

// progressBar redraws a text bar on w at every whole percent that passes
// (a download of unknown size shows bytes instead).
type progressBar struct {
	w           io.Writer
	total, done int64
	shown       int64
}

func (p *progressBar) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	if p.total > 0 {
		if pct := p.done * 100 / p.total; pct != p.shown {
			p.shown = pct
			fmt.Fprintf(p.w, "\r%s %s / %s   ", bar(min(1, float64(p.done)/float64(p.total))), mib(p.done), mib(p.total))
		}
	} else if mb := p.done >> 20; mb != p.shown {
		p.shown = mb
		fmt.Fprintf(p.w, "\r%s   ", mib(p.done))
	}
	return len(b), nil
}

func (p *progressBar) end() { fmt.Fprintln(p.w) }

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
