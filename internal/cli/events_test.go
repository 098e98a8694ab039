package cli_test

import (
	"context"
	"strings"
	"testing"

	"github.com/keelwork/keel/internal/cli"
	"github.com/keelwork/keel/server/auth"
)

// TestEventsVerbs runs `keel events` against `keel serve` with its events
// backbone and `keel recon` / `keel approvals` reads against the same
// server: the tables print, and bad input is refused before anything is
// sent or with the server's problem.
func TestEventsVerbs(t *testing.T) {
	t.Parallel()
	s := startReservationServer(t)
	op := s.cli(t, auth.RoleOperator)
	for name, f := range map[string]apiVerb{
		"topics":      cli.EventsTopics,
		"consumers":   cli.EventsConsumers,
		"reconcilers": cli.ReconReconcilers,
		"runs": func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
			return cli.ReconRuns(ctx, c, o, "", 10, 0)
		},
		"quarantine": func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
			return cli.EventsQuarantine(ctx, c, o, "", 10, 0)
		},
		"manual": func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
			return cli.EventsManual(ctx, c, o, "", "manual", 10, 0)
		},
		"approvals": func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
			return cli.ApprovalsList(ctx, c, o, true, "", 10, 0)
		},
	} {
		if err := runAPI(op, f); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, c := range map[string]struct {
		f    apiVerb
		want string
	}{
		"bad consumer": {func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
			return cli.EventsManual(ctx, c, o, "Bad Name", "", 0, 0)
		}, "not a consumer name"},
		"bad state": {func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
			return cli.EventsManual(ctx, c, o, "", "lost", 0, 0)
		}, "manual or replayed"},
		"bad topic": {func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
			return cli.EventsGet(ctx, c, o, "Bad Topic", "x")
		}, "not a topic"},
		"unknown event": {func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
			return cli.EventsGet(ctx, c, o, "stock.reserved", "nope")
		}, "no event stock.reserved/nope"},
		"replay without reason": {func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
			return cli.EventsReplay(ctx, c, o, "1", " ")
		}, "--reason is required"},
		"replay unknown": {func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
			return cli.EventsReplay(ctx, c, o, "999999", "the mapping is fixed")
		}, "no manual event 999999"},
		"unknown reconciler": {func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
			return cli.ReconRunNow(ctx, c, o, "nope", "")
		}, "no reconciler nope"},
		"bad cutoff": {func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
			return cli.ReconRunNow(ctx, c, o, "x", "yesterday")
		}, "RFC 3339"},
		"bad class": {func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
			return cli.ReconList(ctx, c, o, &cli.DiscrepancyFilter{Class: "typo"})
		}, "unknown discrepancy class"},
		"approve unknown": {func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
			return cli.ApprovalAction(ctx, c, o, "approve", "999999", "looks right to me")
		}, "no approval 999999"},
	} {
		if err := runAPI(op, c.f); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if err := runAPI(op, cli.EventsTopics); err != nil || !strings.Contains(op.out.String(), "TOPIC") {
		t.Fatalf("topics: %v\n%s", err, op.out.String())
	}
}

// apiVerb is one of the engine's own verbs, called as its command does.
type apiVerb = func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error

// runAPI runs an engine verb through the test server's API with the
// CLI's token and output.
func runAPI(r *rsvCLI, f apiVerb) error {
	r.out.Reset()
	r.errOut.Reset()
	return cli.WithAPI(context.Background(), r.o, func(ctx context.Context, c *cli.APIClient) error { return f(ctx, c, r.o) })
}
