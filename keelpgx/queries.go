package keelpgx

// Statements by name, resolved at init so a misspelt name fails every test
// run rather than one code path in production.
var (
	sqlJobInsertMany           = queries.Get("JobInsertMany")
	sqlJobGetByIdempotencyKeys = queries.Get("JobGetByIdempotencyKeys")
	sqlJobClaim                = queries.Get("JobClaim")
	sqlJobInsertClaimed        = queries.Get("JobInsertClaimed")
	sqlJobHeartbeat            = queries.Get("JobHeartbeat")
	sqlJobFinishMany           = queries.Get("JobFinishMany")
	sqlJobCurrentFences        = queries.Get("JobCurrentFences")
	sqlJobPromote              = queries.Get("JobPromote")
	sqlJobRescue               = queries.Get("JobRescue")
	sqlJobCancel               = queries.Get("JobCancel")
	sqlJobRetry                = queries.Get("JobRetry")
	sqlJobDelete               = queries.Get("JobDelete")
	sqlJobWakeIDs              = queries.Get("JobWakeIDs")
	sqlJobWakeFlow             = queries.Get("JobWakeFlow")
	sqlJobGet                  = queries.Get("JobGet")
	sqlJobListAsc              = queries.Get("JobListAsc")
	sqlJobListDesc             = queries.Get("JobListDesc")
	sqlJobListKeyAsc           = queries.Get("JobListKeyAsc")
	sqlJobListKeyDesc          = queries.Get("JobListKeyDesc")
	sqlJobPrune                = queries.Get("JobPrune")

	sqlQueuePause  = queries.Get("QueuePause")
	sqlQueueResume = queries.Get("QueueResume")
	sqlQueueList   = queries.Get("QueueList")
	sqlQueueStats  = queries.Get("QueueStats")

	sqlLeaderAttemptElect = queries.Get("LeaderAttemptElect")
	sqlLeaderResign       = queries.Get("LeaderResign")
	sqlLeaderGet          = queries.Get("LeaderGet")

	sqlAuditInsert = queries.Get("AuditInsert")
	sqlAuditList   = queries.Get("AuditList")

	sqlTableExists      = queries.Get("TableExists")
	sqlMigrationApplied = queries.Get("MigrationApplied")
	sqlMigrationRecord  = queries.Get("MigrationRecord")
	sqlMigrationForget  = queries.Get("MigrationForget")

	sqlNotify        = queries.Get("Notify")
	sqlCurrentSchema = queries.Get("CurrentSchema")
)
