package cli_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/keelwork/keel/internal/cli"
	"github.com/keelwork/keel/server/auth"
)

// TestTrackingVerbs: `keel tracking` comes from the tracking module's
// descriptor and acts through a running server: carrier health lists the
// configured carriers with their mapping versions, a search answers with
// its table, a waybill nobody reported is a sentence and a non-zero exit,
// and malformed carriers, waybills, versions and reasons are refused before
// anything is sent.
func TestTrackingVerbs(t *testing.T) {
	t.Parallel()
	s := startReservationServer(t)
	var out, errOut bytes.Buffer
	o := &cli.AdminOpts{Server: s.url, Token: s.tokens[auth.RoleAdmin], Out: &out, Err: &errOut}
	run := func(args ...string) (string, error) {
		out.Reset()
		errOut.Reset()
		root := &cobra.Command{Use: "keel", SilenceUsage: true, SilenceErrors: true}
		root.AddCommand(cli.ModuleCommands(cli.ModuleRunner(func(*cobra.Command) *cli.AdminOpts { return o }))...)
		root.SetArgs(append([]string{"tracking"}, args...))
		root.SetOut(&out)
		root.SetErr(&errOut)
		err := root.ExecuteContext(context.Background())
		return out.String(), err
	}
	got, err := run("carriers")
	if err != nil {
		t.Fatalf("carriers: %v", err)
	}
	for _, w := range []string{"CARRIER", "cnhub", "epacket", "swiftx", "v1"} {
		if !strings.Contains(got, w) {
			t.Errorf("carriers does not show %q:\n%s", w, got)
		}
	}
	if got, err := run("search", "--q", "WB"); err != nil || !strings.Contains(got, "CARRIER") {
		t.Errorf("search: %v\n%s", err, got)
	}
	if _, err := run("waybill", "cnhub", "WB0000404"); err == nil {
		t.Error("a waybill nobody reported: no error")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"waybill", "cnhub", "x"}, "must be 4-40"},
		{[]string{"waybill", "no/pe", "WB9001"}, "not a carrier code"},
		{[]string{"replay", "cnhub", "zero"}, "positive integer"},
		{[]string{"activate", "cnhub", "1", "--reason", "no"}, "reason of at least"},
		{[]string{"search", "--q", "';drop"}, "must be A-Z"},
		{[]string{"frobnicate"}, "unknown verb"},
	} {
		if _, err := run(c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	// Without a server the verbs say what they need.
	o.Server = ""
	if _, err := run("carriers"); err == nil || !strings.Contains(err.Error(), "--server") {
		t.Errorf("without --server: %v", err)
	}
}
