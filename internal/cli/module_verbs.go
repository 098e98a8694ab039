package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/keelwork/keel/module/modcli"
)

// ModuleCommands are the verbs of every installed module, each group run
// through run.
func ModuleCommands(run modcli.Runner) []*cobra.Command {
	var out []*cobra.Command
	for _, d := range installed {
		if d.Commands != nil {
			out = append(out, d.Commands(run)...)
		}
	}
	return out
}

// ModuleRunner runs module verbs through a running server (module routes
// are not served by the CLI's local mode), with the options opts reads
// from the command's flags.
func ModuleRunner(opts func(cmd *cobra.Command) *AdminOpts) modcli.Runner {
	return func(cmd *cobra.Command, work func(ctx context.Context, e *modcli.Env) error) error {
		o := opts(cmd)
		return WithRemoteAPI(cmd.Context(), o, group(cmd), func(ctx context.Context, c *APIClient) error {
			return work(ctx, &modcli.Env{API: c, JSON: o.JSON, Out: o.Out, Err: o.Err})
		})
	}
}

// group is the name of cmd's top-level command ("reservations").
func group(cmd *cobra.Command) string {
	for cmd.HasParent() && cmd.Parent().HasParent() {
		cmd = cmd.Parent()
	}
	return cmd.Name()
}

// ProblemCode makes the API's problems readable by module verbs
// (modcli.ProblemCode).
func (e *ProblemError) ProblemCode() string { return string(e.Code) }

// WithRemoteAPI is WithAPI for verbs of a business module: the CLI's local
// mode serves only the engine's API, not module routes, so these verbs
// need a running server. group names the verb group in the message.
func WithRemoteAPI(ctx context.Context, o *AdminOpts, group string, f func(ctx context.Context, c *APIClient) error) error {
	if o.Server == "" {
		return fmt.Errorf("keel %s acts through a running server: pass --server URL (or KEEL_SERVER) and KEEL_TOKEN", group)
	}
	return WithAPI(ctx, o, f)
}
