package cli

import (
	"testing"

	"github.com/keelwork/keel/modules/reservation"
)

// TestReservationWordsCoverEveryState: a new state of the module must get
// words in the CLI.
func TestReservationWordsCoverEveryState(t *testing.T) {
	for _, s := range reservation.AllStates {
		if reservationStateWords[s] == "" {
			t.Errorf("state %q has no words", s)
		}
	}
	if len(reservationStateWords) != len(reservation.AllStates) {
		t.Errorf("%d state words for %d states", len(reservationStateWords), len(reservation.AllStates))
	}
	if got := reservationStateWord(""); got != "(new)" {
		t.Errorf("empty from-state reads %q", got)
	}
	if got := reservationStateWord("novel"); got != "novel" {
		t.Errorf("unknown state reads %q", got)
	}
}
