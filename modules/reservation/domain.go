package reservation

import (
	"encoding/json"
	"time"
)

// State is a reservation's state.
type State string

// Reservation states (see the package documentation for the transitions).
const (
	StatePendingPayment State = "pending_payment"
	StatePaid           State = "paid"
	StateCheckedIn      State = "checked_in"
	StateReleased       State = "released"
	StateCancelled      State = "cancelled"
	StateRestored       State = "restored"
	StateExpired        State = "expired"
)

// AllStates lists the states in lifecycle order.
var AllStates = []State{StatePendingPayment, StatePaid, StateCheckedIn, StateReleased, StateRestored, StateCancelled, StateExpired}

// Valid reports whether s is a known state.
func (s State) Valid() bool {
	for _, x := range AllStates {
		if s == x {
			return true
		}
	}
	return false
}

// Holds reports whether a reservation in s counts against its slot's
// capacity.
func (s State) Holds() bool {
	switch s {
	case StatePendingPayment, StatePaid, StateCheckedIn, StateRestored:
		return true
	}
	return false
}

// Mode is a category's release switch.
type Mode string

// Release modes: off releases nothing, dry_run logs what would be released,
// on releases.
const (
	ModeOff    Mode = "off"
	ModeDryRun Mode = "dry_run"
	ModeOn     Mode = "on"
)

// ParseMode validates a mode.
func ParseMode(s string) (Mode, bool) {
	switch m := Mode(s); m {
	case ModeOff, ModeDryRun, ModeOn:
		return m, true
	}
	return "", false
}

// Category is a service category with its release settings.
type Category struct {
	ID              string    `json:"id"`
	NameZH          string    `json:"name_zh"`
	NameEN          string    `json:"name_en"`
	GraceMinutes    int       `json:"grace_minutes"`
	Bands           []Band    `json:"bands"`
	ReminderMinutes int       `json:"reminder_minutes"`
	AppealMinutes   int       `json:"appeal_minutes"`
	HoldMinutes     int       `json:"hold_minutes"`
	ReleaseMode     Mode      `json:"release_mode"`
	Version         int64     `json:"version"`
	UpdatedAt       time.Time `json:"updated_at"`
	UpdatedBy       string    `json:"updated_by"`
}

// Resource is something reservable: a workstation, a parking space.
type Resource struct {
	ID         int64     `json:"id"`
	CategoryID string    `json:"category_id"`
	Name       string    `json:"name"`
	Location   string    `json:"location"`
	CreatedAt  time.Time `json:"created_at"`
}

// Slot is a time slot of a resource with its capacity.
type Slot struct {
	ID         int64     `json:"id"`
	ResourceID int64     `json:"resource_id"`
	StartsAt   time.Time `json:"starts_at"`
	EndsAt     time.Time `json:"ends_at"`
	Capacity   int       `json:"capacity"`
	Held       int       `json:"held"`
	Available  int       `json:"available"`
	Waiting    int       `json:"waiting"`
	Version    int64     `json:"version"`
	// Resource and category, for listings.
	ResourceName string `json:"resource_name,omitempty"`
	CategoryID   string `json:"category_id,omitempty"`
}

// Reservation is one booking of a slot.
type Reservation struct {
	ID                int64      `json:"id"`
	SlotID            int64      `json:"slot_id"`
	ResourceID        int64      `json:"resource_id"`
	CategoryID        string     `json:"category_id"`
	UserID            string     `json:"user_id"`
	State             State      `json:"state"`
	StartsAt          time.Time  `json:"starts_at"`
	EndsAt            time.Time  `json:"ends_at"`
	GraceMinutes      int        `json:"grace_minutes"`
	ExpectedReleaseAt *time.Time `json:"expected_release_at,omitempty"`
	HoldExpiresAt     *time.Time `json:"hold_expires_at,omitempty"`
	AppealUntil       *time.Time `json:"appeal_until,omitempty"`
	Version           int64      `json:"version"`
	RetryCount        int        `json:"retry_count"`
	LastError         string     `json:"last_error,omitempty"`
	NextRetryAt       *time.Time `json:"next_retry_at,omitempty"`
	DeadAt            *time.Time `json:"dead_at,omitempty"`
	CreatedAt         time.Time  `json:"created_at"`
	UpdatedAt         time.Time  `json:"updated_at"`
	PaidAt            *time.Time `json:"paid_at,omitempty"`
	CheckedInAt       *time.Time `json:"checked_in_at,omitempty"`
	ReleasedAt        *time.Time `json:"released_at,omitempty"`
	CancelledAt       *time.Time `json:"cancelled_at,omitempty"`
	RestoredAt        *time.Time `json:"restored_at,omitempty"`
	ExpiredAt         *time.Time `json:"expired_at,omitempty"`
}

// HistoryEntry is one state change of a reservation.
type HistoryEntry struct {
	FromState State     `json:"from_state"`
	ToState   State     `json:"to_state"`
	Version   int64     `json:"version"`
	Actor     string    `json:"actor"`
	Reason    string    `json:"reason"`
	At        time.Time `json:"at"`
}

// Notification is the record of one notice (rsv_notification) with its
// delivery state: pending until the notifier sends, skips or fails it.
type Notification struct {
	ID          int64           `json:"id"`
	Kind        string          `json:"kind"`
	UserID      string          `json:"user_id"`
	State       string          `json:"state"`
	Payload     json.RawMessage `json:"payload"`
	DeliverAt   time.Time       `json:"deliver_at"`
	Attempts    int             `json:"attempts"`
	LastError   string          `json:"last_error,omitempty"`
	SentAt      *time.Time      `json:"sent_at,omitempty"`
	Reservation int64           `json:"reservation_id"`
	Version     int64           `json:"reservation_version"`
}

// Run is the record of one scan or compensation run.
type Run struct {
	ID            int64     `json:"id"`
	Kind          string    `json:"kind"`
	Instance      string    `json:"instance"`
	StartedAt     time.Time `json:"started_at"`
	FinishedAt    time.Time `json:"finished_at"`
	Scanned       int       `json:"scanned"`
	Released      int       `json:"released"`
	Failed        int       `json:"failed"`
	RestoreOK     int       `json:"restore_ok"`
	RestoreFailed int       `json:"restore_failed"`
	Promoted      int       `json:"promoted"`
	HoldsExpired  int       `json:"holds_expired"`
	DryRun        int       `json:"dry_run"`
	DeadLettered  int       `json:"dead_lettered"`
	FirstID       int64     `json:"first_id"`
	LastID        int64     `json:"last_id"`
	Errors        string    `json:"errors,omitempty"`
}

// Duration is how long the run took.
func (r *Run) Duration() time.Duration { return r.FinishedAt.Sub(r.StartedAt) }

// Policy restricts booking after repeated no-shows. Disabled by default:
// a no-show is recorded, never punished, unless an administrator enables it.
type Policy struct {
	Enabled      bool      `json:"enabled"`
	Threshold    int       `json:"threshold"`
	WindowDays   int       `json:"window_days"`
	RestrictDays int       `json:"restrict_days"`
	Version      int64     `json:"version"`
	UpdatedAt    time.Time `json:"updated_at"`
	UpdatedBy    string    `json:"updated_by"`
}

// Restriction is a booking restriction of one user.
type Restriction struct {
	ID         int64      `json:"id"`
	UserID     string     `json:"user_id"`
	Since      time.Time  `json:"since"`
	Until      time.Time  `json:"until"`
	NoShows    int        `json:"noshows"`
	LiftedAt   *time.Time `json:"lifted_at,omitempty"`
	LiftedBy   string     `json:"lifted_by,omitempty"`
	LiftReason string     `json:"lift_reason,omitempty"`
}

// NoShowRecord is a user's no-show count and restriction.
type NoShowRecord struct {
	UserID      string       `json:"user_id"`
	Total       int          `json:"total"`
	InWindow    int          `json:"in_window"`
	Voided      int          `json:"voided"`
	Restriction *Restriction `json:"restriction,omitempty"`
}

// SlotDrift is a slot whose held count differs from the reservations
// holding it.
type SlotDrift struct {
	SlotID  int64 `json:"slot_id"`
	Held    int   `json:"held"`
	Holding int   `json:"holding"`
}
