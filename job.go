package keel

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/keelwork/keel/keeltype"
)

// JobArgs are the arguments of a job kind. They are stored as JSON.
type JobArgs interface {
	// Kind names the job kind; it selects the worker. Keep it stable: stored
	// jobs refer to it.
	Kind() string
}

// JobArgsWithInsertOpts lets a kind supply default insert options.
type JobArgsWithInsertOpts interface {
	InsertOpts() InsertOpts
}

// Job is a claimed job handed to a worker, with typed arguments.
type Job[T JobArgs] struct {
	*keeltype.JobRow
	Args T
}

// Row returns the stored row; it lets *Job[T] be passed where any job is
// expected (CompleteTx).
func (j *Job[T]) Row() *keeltype.JobRow { return j.JobRow }

// JobRef is anything that refers to a claimed job.
type JobRef interface {
	Row() *keeltype.JobRow
}

// WaitExpired reports whether the job was released from waiting by its
// deadline rather than by an event.
func (j *Job[T]) WaitExpired() bool {
	return j.WaitReason != "" && j.WaitDeadline != nil && !time.Now().Before(*j.WaitDeadline)
}

// InsertOpts are options for one insert. Zero values take the kind's
// InsertOpts, then the client's defaults.
type InsertOpts struct {
	// Queue to insert into. Default "default".
	Queue string
	// Priority from 1 (most urgent) to 4. Default 2.
	Priority int
	// RunAt schedules the job; zero means now.
	RunAt time.Time
	// Delay schedules the job Delay from now (ignored when RunAt is set).
	Delay time.Duration
	// MaxAttempts is the attempt budget. Default Config.MaxAttempts.
	MaxAttempts int
	// IdempotencyKey makes the insert idempotent per kind: a repeat insert
	// returns the original job with InsertResult.Duplicate set.
	IdempotencyKey string
	// FlowKey says whom the job is for (an application, tenant, carrier);
	// flow limits and fairness apply per key.
	FlowKey string
	// Metadata is stored with the job, not interpreted by the engine.
	Metadata map[string]any
	// BatchID and Subject attach the job to a bulk task as its item.
	BatchID int64
	Subject string
}

// InsertParams is one job for InsertMany.
type InsertParams struct {
	Args JobArgs
	Opts *InsertOpts
}

// InsertResult is the outcome of one insert.
type InsertResult struct {
	Job *keeltype.JobRow
	// Duplicate is true when the idempotency key already existed: Job is the
	// original job, unchanged.
	Duplicate bool
}

func unmarshalJob[T JobArgs](row *keeltype.JobRow) (*Job[T], error) {
	var args T
	if len(row.Args) > 0 {
		if err := json.Unmarshal(row.Args, &args); err != nil {
			return nil, fmt.Errorf("decoding args of job %d (%s): %w", row.ID, row.Kind, err)
		}
	}
	return &Job[T]{JobRow: row, Args: args}, nil
}
