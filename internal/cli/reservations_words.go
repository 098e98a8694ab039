package cli

import (
	"strings"

	"github.com/keelwork/keel/modules/reservation"
)

// The reservation module keeps its console wording unexported, so the CLI
// holds the English words of the reservation module's states, run kinds,
// notification kinds and delivery states here; a test keeps the states in
// step with reservation.AllStates.

var reservationStateWords = map[reservation.State]string{
	reservation.StatePendingPayment: "awaiting payment",
	reservation.StatePaid:           "paid, awaiting check-in",
	reservation.StateCheckedIn:      "checked in",
	reservation.StateReleased:       "released (no-show)",
	reservation.StateRestored:       "restored on appeal",
	reservation.StateCancelled:      "cancelled",
	reservation.StateExpired:        "expired unpaid",
}

var runKindWords = map[string]string{"scan": "release scan", "compensation": "compensation"}

var notificationKindWords = map[string]string{
	"reminder":     "check-in reminder",
	"release":      "release notice",
	"offer":        "waitlist offer",
	"offer_lapsed": "offer lapsed",
	"restore":      "restore notice",
	"availability": "availability event",
}

var deliveryStateWords = map[string]string{
	"pending": "pending",
	"sent":    "sent",
	"skipped": "skipped (reservation moved on)",
	"failed":  "failed",
}

// wordOr is m's word for key, or key itself for a value the CLI does not
// know yet (a newer server).
func wordOr[K ~string](m map[K]string, key K) string {
	if w, ok := m[key]; ok {
		return w
	}
	return string(key)
}

func reservationStateWord(s reservation.State) string {
	if s == "" {
		return "(new)"
	}
	return wordOr(reservationStateWords, s)
}

func reservationStateNames() string {
	names := make([]string, len(reservation.AllStates))
	for i, s := range reservation.AllStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}
