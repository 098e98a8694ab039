package keeltype

import (
	"encoding/json"
	"time"
)

// QueueRow is a queue's persisted control state. A queue exists implicitly
// once a job names it; a row is written when it is first paused or listed.
type QueueRow struct {
	Name      string
	PausedAt  *time.Time
	PausedBy  string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// QueueStats is a queue's depth by state and the age of its oldest
// available job.
type QueueStats struct {
	Queue           string
	Counts          map[JobState]int64
	OldestAvailable *time.Time
	Paused          bool
}

// AuditRow is one audited control action (operator or automatic).
type AuditRow struct {
	ID      int64
	At      time.Time
	Actor   string // "user:alice", "token:ci", "system:autopause", ...
	Action  string // "job.cancel", "queue.pause", "flowkey.autopause", ...
	Target  string // "job:42", "queue:default", "flowkey:app:7"
	Reason  string
	Context json.RawMessage
}
