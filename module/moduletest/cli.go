package moduletest

import (
	"bytes"
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/keelwork/keel/internal/syncbuf"
	"github.com/keelwork/keel/module/modcli"
)

// Output collects what verbs write (CLI.Err: a progress bar, say) while
// the test reads it from another goroutine.
type Output = syncbuf.Buffer

// CLI runs a module's `keel` verbs inside the test, through cobra as the
// keel binary runs them, against an API (an HTTPCaller on ServeAPI): a
// test checks what a user typing `keel <module> …` reads on standard
// output and in the error, with the --json switch as the binary has it.
//
//	cli := &moduletest.CLI{API: caller, Verbs: notes.Commands}
//	out, err := cli.Run(ctx, "notes", "list", "--json")
type CLI struct {
	// API is what the verbs call.
	API modcli.Caller
	// Verbs are the module's verbs (its Descriptor's Commands).
	Verbs func(modcli.Runner) []*cobra.Command
	// Err is the verbs' standard error (hints, a progress bar); nil
	// discards it.
	Err io.Writer
}

// Run runs `keel args…` and returns what the verb wrote to standard output.
func (c *CLI) Run(ctx context.Context, args ...string) (string, error) {
	var out bytes.Buffer
	stderr := c.Err
	if stderr == nil {
		stderr = io.Discard
	}
	runner := func(cmd *cobra.Command, work func(ctx context.Context, e *modcli.Env) error) error {
		asJSON, _ := cmd.Flags().GetBool("json")
		return work(cmd.Context(), &modcli.Env{API: c.API, JSON: asJSON, Out: &out, Err: stderr})
	}
	// Usage and cobra's own error lines are the binary's, not the verb's:
	// the error itself is returned.
	root := &cobra.Command{Use: "keel", SilenceUsage: true, SilenceErrors: true}
	root.PersistentFlags().Bool("json", false, "print the server's JSON as it came")
	root.AddCommand(c.Verbs(runner)...)
	root.SetArgs(args)
	root.SetOut(io.Discard)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}
