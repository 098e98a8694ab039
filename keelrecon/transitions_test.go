package keelrecon_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
)

// TestNext checks every (state, event) pair against the lifecycle.
func TestNext(t *testing.T) {
	type key struct {
		s  keelrecon.State
		ev keelrecon.Event
		na bool
	}
	allowed := map[key]keelrecon.State{}
	for _, na := range []bool{false, true} {
		allowed[key{keelrecon.StateOpen, keelrecon.EventRequest, na}] = keelrecon.StateAwaitingApproval
		allowed[key{keelrecon.StateAwaitingApproval, keelrecon.EventApprove, na}] = keelrecon.StateApproved
		allowed[key{keelrecon.StateAwaitingApproval, keelrecon.EventReject, na}] = keelrecon.StateRejected
		allowed[key{keelrecon.StateApproved, keelrecon.EventExecute, na}] = keelrecon.StateExecuted
		for _, s := range []keelrecon.State{keelrecon.StateAutoHealed, keelrecon.StateExecuted} {
			allowed[key{s, keelrecon.EventGone, na}] = keelrecon.StateVerified
		}
		for _, s := range []keelrecon.State{keelrecon.StateOpen, keelrecon.StateAwaitingApproval, keelrecon.StateApproved, keelrecon.StateRejected} {
			allowed[key{s, keelrecon.EventGone, na}] = keelrecon.StateResolved
		}
		for _, s := range keelrecon.States {
			to := s
			switch s {
			case keelrecon.StateAutoHealed, keelrecon.StateExecuted, keelrecon.StateVerified, keelrecon.StateResolved:
				to = keelrecon.StateOpen
			}
			allowed[key{s, keelrecon.EventSeen, na}] = to
		}
	}
	allowed[key{keelrecon.StateOpen, keelrecon.EventExecute, false}] = keelrecon.StateExecuted
	allowed[key{keelrecon.StateOpen, keelrecon.EventAutoHeal, false}] = keelrecon.StateAutoHealed
	events := []keelrecon.Event{keelrecon.EventRequest, keelrecon.EventApprove, keelrecon.EventReject, keelrecon.EventExecute,
		keelrecon.EventAutoHeal, keelrecon.EventSeen, keelrecon.EventGone}
	for _, s := range keelrecon.States {
		for _, ev := range events {
			for _, na := range []bool{false, true} {
				got, ok := keelrecon.Next(s, ev, na)
				want, wantOK := allowed[key{s, ev, na}]
				if ok != wantOK || (ok && got != want) {
					t.Errorf("Next(%s, %s, needsApproval=%t) = %s, %t; want %s, %t", s, ev, na, got, ok, want, wantOK)
				}
			}
		}
	}
}

// badRec reports an impact without its currency.
type badRec[TTx any] struct{}

func (badRec[TTx]) Name() string            { return "bad" }
func (badRec[TTx]) RuleVersion() string     { return "v0" }
func (badRec[TTx]) Schedule() keel.Schedule { return nil }
func (badRec[TTx]) Run(context.Context, keelrecon.RunInput) (keelrecon.RunOutput, error) {
	return keelrecon.RunOutput{Compared: 1, Discrepancies: []keelrecon.Discrepancy{{Class: keelrecon.Other, Key: "k",
		Evidence: map[string]json.RawMessage{"ours": json.RawMessage(`{"a":1}`)}, SuggestedAction: "nothing", Impact: 5}}}, nil
}
func (badRec[TTx]) Execute(context.Context, keelsql.Tx[TTx], *keelrecon.DiscrepancyRow, string) error {
	return nil
}
