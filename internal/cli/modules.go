package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/modules/alarm"
	"github.com/keelwork/keel/modules/delivery"
	"github.com/keelwork/keel/modules/export"
	"github.com/keelwork/keel/modules/inventory"
	"github.com/keelwork/keel/modules/payment"
	"github.com/keelwork/keel/modules/reservation"
	"github.com/keelwork/keel/modules/tracking"
	"github.com/keelwork/keel/server/migration"
)

// installed lists the modules in the binary, in start order: installing
// a module is one line here (its Descriptor names its migration lines,
// constructors and verbs).
var installed = []*module.Descriptor{
	&reservation.Descriptor,
	&delivery.Descriptor,
	&inventory.Descriptor,
	&tracking.Descriptor,
	&alarm.Descriptor,
	&payment.Descriptor,
	&export.Descriptor,
}

// allLines are the server's, the events backbone's, reconciliation's and
// every installed module's migration lines (events before the modules that
// emit).
func allLines(dialect string) []keelmigrate.Line {
	lines := migration.Lines(dialect)
	lines = append(lines, eventsLines(dialect)...)
	lines = append(lines, keelrecon.Lines(dialect)...)
	for _, m := range installed {
		lines = append(lines, m.Lines(dialect)...)
	}
	return lines
}

// moduleNames lists the installed modules.
func moduleNames() []string {
	names := make([]string, len(installed))
	for i, m := range installed {
		names[i] = m.Name
	}
	return names
}

// parseModules checks a --modules list against what is installed; "all"
// (the default) is every installed module, "" none.
func parseModules(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "all":
		return moduleNames(), nil
	case "none":
		// An environment variable set to the empty string reads as unset
		// (the default, all), so "none" is how KEEL_MODULES says none.
		return nil, nil
	}
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if !slices.Contains(moduleNames(), n) {
			return nil, fmt.Errorf("setting modules: no module %q (installed: %s)", n, strings.Join(moduleNames(), ", "))
		}
		out = append(out, n)
	}
	return out, nil
}

// ParseModuleSettings reads "module.key=value,…" (the --module-settings
// flag).
func ParseModuleSettings(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		mod, _, dotted := strings.Cut(k, ".")
		if !ok || !dotted || !slices.Contains(moduleNames(), mod) {
			return nil, fmt.Errorf("setting module-settings: want module.key=value with an installed module, got %q", part)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

// buildModules constructs the selected modules on a database. Each module
// package is generic over the driver's transaction type, so construction
// is a generic function, not a table of values.
func buildModules[TTx any](names []string, h *module.Host[TTx]) ([]module.Module[TTx], error) {
	var mods []module.Module[TTx]
	for _, n := range names {
		m, err := newModule(n, h)
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", n, err)
		}
		mods = append(mods, m)
	}
	return mods, nil
}

func newModule[TTx any](name string, h *module.Host[TTx]) (module.Module[TTx], error) {
	for _, d := range installed {
		if d.Name == name {
			return module.Build(d, h)
		}
	}
	return nil, fmt.Errorf("not installed")
}

// moduleHost is what every module of one server is given.
func moduleHost[TTx any](db keelsql.DB[TTx], logger *slog.Logger, reg prometheus.Registerer, o *ServeOpts, ev *keelevents.Events[TTx]) *module.Host[TTx] {
	return &module.Host[TTx]{DB: db, Logger: logger, Registerer: reg, Demo: o.Demo, Settings: o.ModuleSettings, Events: ev,
		Services: module.NewServices()}
}

// startModules starts each module after the client started; on failure the
// ones already started are stopped.
// On an error it returns the modules that did start, for the shutdown to
// stop within its grace: stopping them here with ctx, which a stop during
// startup has cancelled, would leave their connections open.
func startModules[TTx any](ctx context.Context, mods []module.Module[TTx], client *keel.Client[TTx]) ([]module.Module[TTx], error) {
	for i, m := range mods {
		if err := m.Start(ctx, client); err != nil {
			return mods[:i], fmt.Errorf("starting module %s: %w", m.Name(), err)
		}
	}
	return mods, nil
}

// stopModules stops modules in reverse start order.
func stopModules[TTx any](ctx context.Context, mods []module.Module[TTx]) error {
	var errs []error
	for i := len(mods) - 1; i >= 0; i-- {
		if err := mods[i].Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping module %s: %w", mods[i].Name(), err))
		}
	}
	return errors.Join(errs...)
}

func webOf[TTx any](mods []module.Module[TTx]) []module.Web {
	out := make([]module.Web, len(mods))
	for i, m := range mods {
		out[i] = m
	}
	return out
}
