// Package crashtest is the multi-process crash test of the engine on
// PostgreSQL: three worker processes (the program in ./worker) drain a few
// thousand jobs while a controller (crash_test.go) SIGKILLs and restarts them
// and freezes them (SIGSTOP/SIGCONT) past their leases. Every job's work
// writes an external effect keyed by (job id, fence); afterwards the test
// checks that every job is final with exactly one effective result.
//
// This file holds what the controller and the worker program share: the job
// kind, its arguments and result, and the effect tables.
package crashtest

// Kind is the job kind the worker program works.
const Kind = "crash.effect"

// EffectArgs are the arguments of a crash.effect job.
type EffectArgs struct {
	// Plain selects the at-least-once path: the effect is committed in its
	// own transaction and the job completes afterwards through the batched
	// completer. Otherwise the effect and the completion commit together
	// through Client.CompleteTx.
	Plain bool `json:"plain"`
}

// Kind implements keel.JobArgs.
func (EffectArgs) Kind() string { return Kind }

// Paths an effect can take; stored in crash_effect.path and in the result.
const (
	PathCompleteTx = "complete_tx"
	PathPlain      = "plain"
)

// EffectResult is the job result a worker records: who did the effective
// attempt and with which fence.
type EffectResult struct {
	PID   int    `json:"pid"`
	Fence int64  `json:"fence"`
	Path  string `json:"path"`
}

// SchemaSQL creates the tables the worker writes, in the Keel schema (the
// connections' search_path).
//
//   - crash_effect: the external effect, one row per attempt that got its
//     effect committed, keyed by (job_id, fence). An attempt runs once per
//     fence, so a duplicate key would be an engine bug (fence reuse).
//   - crash_stale: one row per CompleteTx the engine rejected as stale; the
//     worker rolled the transaction (and the effect in it) back.
//   - crash_anomaly: anything the worker did not expect (an effect insert or
//     commit failing for another reason). The test requires it empty.
//   - crash_proc: per worker process, its engine counters, flushed often
//     (a SIGKILLed process loses at most its last flush interval).
const SchemaSQL = `
CREATE TABLE crash_effect (
    job_id     bigint      NOT NULL,
    fence      bigint      NOT NULL,
    worker_pid integer     NOT NULL,
    path       text        NOT NULL,
    at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (job_id, fence)
);
CREATE TABLE crash_stale (
    job_id        bigint      NOT NULL,
    fence         bigint      NOT NULL,
    current_fence bigint      NOT NULL,
    current_state text        NOT NULL,
    worker_pid    integer     NOT NULL,
    at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (job_id, fence)
);
CREATE TABLE crash_anomaly (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id     bigint      NOT NULL,
    fence      bigint      NOT NULL,
    worker_pid integer     NOT NULL,
    what       text        NOT NULL,
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE crash_proc (
    pid            integer     PRIMARY KEY,
    client_id      text        NOT NULL,
    stale_rejected bigint      NOT NULL DEFAULT 0,
    leases_lost    bigint      NOT NULL DEFAULT 0,
    leases_expired bigint      NOT NULL DEFAULT 0,
    completed      bigint      NOT NULL DEFAULT 0,
    updated_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
`
