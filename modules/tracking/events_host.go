package tracking

import (
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/module"
)

// hostEvents is the host's events backbone, where changes are emitted
// (nil: the host offers none and changes are not emitted; UseEvents
// sets one).
func hostEvents[TTx any](h *module.Host[TTx]) *keelevents.Events[TTx] { return h.Events }
