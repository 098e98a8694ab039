package inventory

import (
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/module"
)

// hostEvents is the host's events backbone, if it offers one.
func hostEvents[TTx any](h *module.Host[TTx]) *keelevents.Events[TTx] { return h.Events }
