package keel

// The codes of the reasons the engine writes for its own background work.
// An audit entry keeps its English Reason for API and CLI readers and
// stores the code under ReasonCodeKey in its context, beside the
// parameters the words need, so the console says it in the operator's
// language without parsing the English (module/web registers the words).
const (
	ReasonCodeKey = "reason_code"
	// ReasonCountersDrifted: a batch's counters were corrected from its
	// items (batch.reconcile; context counters, items).
	ReasonCountersDrifted = "batch.counters_drifted"
	// ReasonFailureThreshold: a flow key paused itself (flowkey.autopause;
	// context consecutive_failures, threshold).
	ReasonFailureThreshold = "flowkey.failure_threshold"
	// ReasonKeyAutoPaused: a batch's key paused itself (batch.autopause;
	// context key, last_error).
	ReasonKeyAutoPaused = "batch.key_autopaused"
)
