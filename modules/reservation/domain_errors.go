package reservation

import (
	"net/http"

	"github.com/keelwork/keel/module"
)

// Problems the module reports with stable codes.
var (
	errSlotFull        = module.Errorf(http.StatusConflict, "slot_full", "the slot has no free place")
	errSlotOver        = module.Errorf(http.StatusConflict, "slot_over", "the slot has ended")
	errSlotGone        = module.Errorf(http.StatusConflict, "slot_taken", "the slot's place was taken meanwhile; restore is no longer possible")
	errAppealClosed    = module.Errorf(http.StatusConflict, "appeal_window_closed", "the appeal window has passed")
	errHoldLapsed      = module.Errorf(http.StatusConflict, "hold_lapsed", "the booking's hold has lapsed; book again")
	errAlreadyWaiting  = module.Errorf(http.StatusConflict, "already_waiting", "the user is already on this slot's waitlist")
	errCategoryExists  = module.Errorf(http.StatusConflict, "category_exists", "a category with this id exists")
	errNotDeadLetter   = module.Errorf(http.StatusConflict, "not_dead_letter", "the reservation is not a dead letter")
	errNoRestriction   = module.Errorf(http.StatusConflict, "not_restricted", "the user has no active restriction")
	errRestoreDisabled = module.Errorf(http.StatusConflict, "appeal_not_allowed", "the category allows no appeal")
)

// stateError says a transition is not allowed from the reservation's
// current state or version.
func stateError(id int64, state State, version int64, want string) error {
	return module.Errorf(http.StatusConflict, "invalid_state",
		"reservation %d is %s (version %d); this needs %s", id, state, version, want)
}

// versionError says the caller's version is stale.
func versionError(id, have, want int64) error {
	return module.Errorf(http.StatusConflict, "version_conflict",
		"reservation %d is at version %d, not %d", id, have, want)
}

// restrictedError refuses a booking under the no-show policy.
func restrictedError(user string, r *Restriction) error {
	return module.Errorf(http.StatusConflict, "booking_restricted",
		"user %s may not book until %s (%d no-shows)", user, r.Until.UTC().Format("2006-01-02 15:04 MST"), r.NoShows)
}
