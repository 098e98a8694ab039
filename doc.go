// Package keel is a durable job engine whose authority is the database.
//
// Jobs are rows. A worker owns a job through a lease and a fencing token:
// every claim increments the job's fence, heartbeats extend the lease only
// for the same (job, owner, fence), and every state change after the claim is
// one conditional UPDATE that names the fence. A worker that lost its lease
// (paused, partitioned, or simply slow) can therefore never commit: its late
// completion changes nothing and returns *keeltype.StaleFenceError.
//
// Failures are classified. A plain error is retryable (exponential backoff
// with full jitter, within the attempt budget); JobPermanent sends the job to
// the manual state (dead letter, never dropped); JobUnknown says the side
// effect may have happened, so the kind's Check runs before any new attempt;
// JobWait parks the job with a reason and deadline without counting a
// failure; JobSnooze reschedules without consuming an attempt.
//
// The same engine runs on PostgreSQL (keelpgx, many processes) and embedded
// SQLite (keelsqlite, one process); keeldrivertest holds the conformance
// suite both pass.
package keel
