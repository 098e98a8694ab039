package keel

import (
	"errors"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// ErrStopping is what a worker returns (wrapped or not) when it could not
// do its work because its own process is stopping: a module shutting down
// its claimers or connections before the engine stops. A stop is not a
// failure: the job is handed back without an attempt, without an error and
// without counting toward its key's consecutive failures, breaker or
// auto-pause, and runs again shortly (here, if the process keeps running,
// or on another instance).
var ErrStopping = errors.New("keel: stopping")

// stoppedRetryDelay spaces the rerun of a job handed back by ErrStopping,
// so a worker that keeps answering it while its process stops does not
// spin.
const stoppedRetryDelay = time.Second

// stoppedParams hands a job back after ErrStopping: scheduled again, its
// attempt returned, nothing recorded as an error.
func stoppedParams(row *keeltype.JobRow) *keeldriver.JobFinishParams {
	at := time.Now().UTC().Add(stoppedRetryDelay)
	return &keeldriver.JobFinishParams{ID: row.ID, Fence: row.Fence, State: keeltype.JobStateScheduled,
		AttemptDelta: -1, RunAt: &at}
}
