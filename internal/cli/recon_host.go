package cli

import (
	"fmt"
	"log/slog"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/eventsweb"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/module"
)

// attachRecon gives the modules of a server reconciliation and the
// four-eyes approvals (Host.Recon), before they are built so that they can
// register reconcilers and approval kinds.
func attachRecon[TTx any](h *module.Host[TTx], logger *slog.Logger) (*keelrecon.Recon[TTx], error) {
	rc, err := keelrecon.New(h.DB, &keelrecon.Config{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("reconciliation: %w", err)
	}
	h.Recon = rc
	return rc, nil
}

// hostedWebs are the modules' surfaces and the events and reconciliation
// surface; ev (the server's events backbone, nil without one) adds the
// events pages.
func hostedWebs[TTx any](mods []module.Module[TTx], rc *keelrecon.Recon[TTx], ev *keelevents.Events[TTx]) ([]module.Web, error) {
	ew, err := eventsweb.New(&eventsweb.Config[TTx]{Recon: rc, Events: ev})
	if err != nil {
		return nil, err
	}
	return append(webOf(mods), ew), nil
}
