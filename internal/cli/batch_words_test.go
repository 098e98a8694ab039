package cli

import (
	"bytes"
	"slices"
	"testing"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/server/api"
)

// TestBatchWordsCoverEveryValue keeps the wording and the detail's order
// in step with keeltype: a new state or outcome must get words.
func TestBatchWordsCoverEveryValue(t *testing.T) {
	t.Parallel()
	for _, s := range batchStates {
		if !api.ValidBatchState(s) || batchStateWords[s] == "" {
			t.Errorf("state %q: valid %v, words %q", s, api.ValidBatchState(s), batchStateWords[s])
		}
	}
	if len(batchStateWords) != len(batchStates) {
		t.Errorf("%d state words for %d states", len(batchStateWords), len(batchStates))
	}
	for _, o := range keeltype.AllBatchOutcomes {
		if outcomeWords[o] == "" {
			t.Errorf("outcome %q has no words", o)
		}
		if n := len(slices.DeleteFunc(slices.Clone(detailOrder), func(x keeltype.BatchOutcome) bool { return x != o })); n != 1 {
			t.Errorf("outcome %q appears %d times in the detail", o, n)
		}
	}
	if len(detailOrder) != len(keeltype.AllBatchOutcomes) {
		t.Errorf("detail shows %d outcomes of %d", len(detailOrder), len(keeltype.AllBatchOutcomes))
	}
}

func TestBar(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		done, total int64
		want        string
	}{
		{0, 0, "[....]"}, {0, 8, "[....]"}, {3, 8, "[#...]"}, {8, 8, "[####]"}, {9, 8, "[####]"},
	} {
		if got := bar(c.done, c.total, 4); got != c.want {
			t.Errorf("bar(%d, %d) = %q, want %q", c.done, c.total, got, c.want)
		}
	}
}

// TestStatusLineBlanksLeftovers: a shorter redraw covers the longer one.
func TestStatusLineBlanksLeftovers(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := &statusLine{w: &buf}
	l.end()
	l.draw("12345")
	l.draw("abc")
	l.draw("wxyz")
	l.end()
	l.end()
	if got, want := buf.String(), "\r12345\rabc  \rwxyz\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestItemWhy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		outcome keeltype.BatchOutcome
		why     string
		want    string
	}{
		{keeltype.OutcomeSkipped, `{"skip_reason":"already_delivered"}`, "already_delivered"},
		{keeltype.OutcomeSkipped, "already_delivered", "already_delivered"},
		{keeltype.OutcomeSkipped, `{"other":1}`, `{"other":1}`},
		{keeltype.OutcomeFailed, `{"skip_reason":"x"}`, `{"skip_reason":"x"}`},
	} {
		if got := itemWhy(&api.BatchItem{Outcome: c.outcome, Why: c.why}); got != c.want {
			t.Errorf("itemWhy(%s, %s) = %q, want %q", c.outcome, c.why, got, c.want)
		}
	}
}

func TestBatchStateText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		b    api.Batch
		want string
	}{
		{api.Batch{State: keeltype.BatchPartialCompleted}, "partially completed"},
		{api.Batch{State: keeltype.BatchPaused, Pause: &api.BatchPause{Reason: "manual", By: "cli:ann"}}, "paused by cli:ann"},
		{api.Batch{State: keeltype.BatchPaused, Pause: &api.BatchPause{Reason: "auto", Key: "app:7"}}, "paused automatically (key app:7 kept failing)"},
		{api.Batch{State: keeltype.BatchPaused, Pause: &api.BatchPause{Reason: "auto"}}, "paused automatically"},
		{api.Batch{State: "novel"}, "novel"},
		{api.Batch{ID: 4, State: keeltype.BatchRunning, PausedKeys: []*api.BatchKey{{Key: "app:7", Paused: true, ConsecutiveFailures: 10}}},
			"running, held: 1 paused key(s) (app:7 after 10 failures); their items wait until resumed (keel batches resume-key 4 KEY)"},
		{api.Batch{State: keeltype.BatchCompleted, PausedKeys: []*api.BatchKey{{Key: "app:7", Paused: true}}}, "completed"},
	} {
		if got := batchStateText(&c.b); got != c.want {
			t.Errorf("%+v: %q, want %q", c.b, got, c.want)
		}
	}
}
