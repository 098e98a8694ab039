package cli

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/eventsweb"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
)

// localWebs is the events and reconciliation surface of the CLI's local
// mode: the same routes as a server's, over the database, with no module
// built. Reads (outbox, consumers, quarantine, manual events, runs,
// discrepancies, approvals) and decisions (request, approve, reject) work
// as on a server, audited as the local operator; what needs code that runs
// in a server (a consumer to replay into, a reconciler to run or execute)
// is refused with a sentence (localRefusal). The events backbone here has
// no bus and runs no relay: the CLI never publishes or consumes.
func localWebs[TTx any](ctx context.Context, mdb keelsql.DB[TTx], client *keel.Client[TTx]) ([]module.Web, func(), error) {
	quiet := slog.New(slog.DiscardHandler)
	rc, err := keelrecon.New(mdb, &keelrecon.Config{Logger: quiet})
	if err != nil {
		return nil, nil, err
	}
	if err := rc.Start(ctx, client); err != nil {
		return nil, nil, err
	}
	ev, err := keelevents.New(mdb, noBus{}, &keelevents.Config{Logger: quiet, DisableRelay: true,
		StatsInterval: time.Hour, Registerer: prometheus.NewRegistry()})
	if err != nil {
		return nil, nil, err
	}
	if err := ev.Start(ctx, client); err != nil {
		return nil, nil, err
	}
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = ev.Stop(sctx)
	}
	w, err := eventsweb.New(&eventsweb.Config[TTx]{Recon: rc, Events: ev})
	if err != nil {
		stop()
		return nil, nil, err
	}
	return []module.Web{w}, stop, nil
}

// localEventsRoute says whether path is one of the routes localWebs
// serves.
func localEventsRoute(path string) bool {
	for _, p := range []string{EventsPrefix, ReconPrefix, ApprovalsPrefix} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// noBus is the local mode's bus: nothing is published or consumed from
// the CLI (Events.Start subscribes no consumer and runs no relay here).
type noBus struct{}

var errNoBus = errors.New("the CLI's local mode has no events bus")

func (noBus) Name() string { return "none" }
func (noBus) Publish(context.Context, []keelevents.Message) (int, error) {
	return 0, errNoBus
}
func (noBus) Subscribe(context.Context, keelevents.Subscription, keelevents.Handler) (keelevents.Subscriber, error) {
	return nil, errNoBus
}
func (noBus) Close() error { return nil }

// localRefusal turns the refusals of an action that needs a server's code
// into a sentence saying so, in local mode (o.Server empty); other errors
// pass.
func localRefusal(o *AdminOpts, what string, err error) error {
	var p *ProblemError
	if o.Server != "" || !errors.As(err, &p) {
		return err
	}
	switch {
	case p.Code == eventsweb.CodeNotRegistered:
		return errors.New(what + " needs the consumer running, which only a server does: " +
			"run it against the server that hosts the consumer (--server URL and KEEL_TOKEN); the event stays manual")
	case p.Code == "not_found" && strings.Contains(p.Detail, "no such reconciler"):
		return errors.New(what + " needs the reconciler, which the server hosting its module registers: " +
			"run it with --server URL and KEEL_TOKEN; nothing was changed")
	}
	return err
}
