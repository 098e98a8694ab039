package cli

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/server/api"
)

// The console's wording (server/console) in English: operators read
// states and outcomes in words, never raw enums.

// batchStates lists the states in their lifecycle order.
var batchStates = []keeltype.BatchState{keeltype.BatchQueued, keeltype.BatchRunning, keeltype.BatchPaused,
	keeltype.BatchCompleted, keeltype.BatchPartialCompleted, keeltype.BatchTerminated}

var batchStateWords = map[keeltype.BatchState]string{
	keeltype.BatchQueued:           "queued",
	keeltype.BatchRunning:          "running",
	keeltype.BatchPaused:           "paused",
	keeltype.BatchCompleted:        "completed",
	keeltype.BatchPartialCompleted: "partially completed",
	keeltype.BatchTerminated:       "terminated",
}

var outcomeWords = map[keeltype.BatchOutcome]string{
	keeltype.OutcomeQueued:             "queued",
	keeltype.OutcomeProcessing:         "processing",
	keeltype.OutcomeWaitingConnection:  "waiting for connection",
	keeltype.OutcomeWaitingExternalACK: "waiting for external ACK",
	keeltype.OutcomeWaitingACK:         "waiting for ACK",
	keeltype.OutcomeWaiting:            "waiting",
	keeltype.OutcomeSuccess:            "success",
	keeltype.OutcomeFailed:             "failed",
	keeltype.OutcomeSkipped:            "skipped",
	keeltype.OutcomeUnprocessed:        "unprocessed",
}

// waitingOutcomes are the buckets of items parked until an event.
var waitingOutcomes = []keeltype.BatchOutcome{keeltype.OutcomeWaitingConnection, keeltype.OutcomeWaitingExternalACK,
	keeltype.OutcomeWaitingACK, keeltype.OutcomeWaiting}

func batchStateWord(s keeltype.BatchState) string {
	if w, ok := batchStateWords[s]; ok {
		return w
	}
	return string(s)
}

func outcomeWord(o keeltype.BatchOutcome) string {
	if w, ok := outcomeWords[o]; ok {
		return w
	}
	return string(o)
}

func batchStateNames() string {
	var names []string
	for _, s := range batchStates {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

func outcomeNames() string {
	var names []string
	for _, o := range keeltype.AllBatchOutcomes {
		names = append(names, string(o))
	}
	return strings.Join(names, ", ")
}

// batchStateText is the state in words, with who or what paused it.
func batchStateText(b *api.Batch) string {
	w := batchStateWord(b.State)
	switch {
	case b.Pause == nil && !b.State.Final() && len(b.PausedKeys) > 0:
		return w + heldText(b)
	case b.Pause == nil:
		return w
	case b.Pause.Reason == "manual" && b.Pause.By != "":
		return w + " by " + b.Pause.By
	case strings.HasPrefix(b.Pause.Reason, "auto") && b.Pause.Key != "":
		return w + " automatically (key " + b.Pause.Key + " kept failing)"
	case strings.HasPrefix(b.Pause.Reason, "auto"):
		return w + " automatically"
	}
	return w
}

// waiting counts the items in every waiting bucket.
func waiting(counts map[keeltype.BatchOutcome]int64) int64 {
	var n int64
	for _, o := range waitingOutcomes {
		n += counts[o]
	}
	return n
}

// bar draws done of total in width cells.
func bar(done, total int64, width int) string {
	filled := 0
	if total > 0 {
		filled = int(int64(width) * min(done, total) / total)
	}
	return "[" + strings.Repeat("#", filled) + strings.Repeat(".", width-filled) + "]"
}

// progressText is "done/total [bar]" for tables.
func progressText(p api.BatchProgress) string {
	return fmt.Sprintf("%d/%d %s", p.Done, p.Total, bar(p.Done, p.Total, 10))
}

// itemWhy is the reason of an item's outcome. For a skip the engine
// records {"skip_reason": code}, which the API's why passes through as raw
// JSON; the code alone is what an operator reads.
func itemWhy(it *api.BatchItem) string {
	if it.Outcome != keeltype.OutcomeSkipped {
		return it.Why
	}
	var r struct {
		Code string `json:"skip_reason"`
	}
	if json.Unmarshal([]byte(it.Why), &r) == nil && r.Code != "" {
		return r.Code
	}
	return it.Why
}

// heldText says that a running batch is held by paused keys (an
// application's auto-pause stops that key only): without it, a watch of
// such a batch would look stuck for no reason.
func heldText(b *api.Batch) string {
	names := make([]string, 0, 3)
	for _, k := range b.PausedKeys {
		if len(names) == 3 {
			names = append(names, "…")
			break
		}
		if k.ConsecutiveFailures > 0 {
			names = append(names, fmt.Sprintf("%s after %d failures", k.Key, k.ConsecutiveFailures))
		} else {
			names = append(names, k.Key)
		}
	}
	return fmt.Sprintf(", held: %d paused key(s) (%s); their items wait until resumed (keel batches resume-key %d KEY)",
		len(b.PausedKeys), strings.Join(names, ", "), b.ID)
}
