package cli

import (
	"time"

	"github.com/keelwork/keel/module/modcli"
)

// The engine's own verbs (events, recon, approvals) share the module kit's
// CLI helpers, so an id, a missing object and an optional time read the
// same in every verb.

func positiveID(what, id string) (string, error) {
	if err := modcli.PositiveID(what, id); err != nil {
		return "", err
	}
	return id, nil
}

func notFound(what, id string, err error) error { return modcli.NotFound(what, id, err) }

func optTS(t *time.Time) string { return modcli.OptTS(t) }
