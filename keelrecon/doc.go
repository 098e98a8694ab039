// Package keelrecon proves convergence by reconciliation and puts what it
// cannot settle automatically before people, with four-eyes approvals.
//
// A module registers reconcilers (Recon.Register). The engine's leader runs
// each on its schedule, once per tick across instances (a keel.PeriodicJob
// whose tick is the run's input cutoff), and operators run one on demand
// (Recon.Run). A run records its cutoff, rule version, how many items it
// compared and its discrepancy totals by class and by amount, and a digest
// of its result: the same inputs give the same digest.
//
// A discrepancy is keyed by (reconciler, class, key), so a rerun finds the
// same row again. It holds each source's evidence, a suggested action and
// its impact (integer minor units and a currency). Its lifecycle:
//
//	open → auto_healed                       (an action the reconciler declares safe)
//	open → executed                          (below the approval threshold)
//	open → awaiting_approval → approved → executed
//	awaiting_approval → rejected
//	auto_healed | executed → verified        (the next run no longer finds it)
//	open | awaiting_approval | approved | rejected → resolved (gone by itself)
//	auto_healed | executed | verified | resolved → open (found again: a new generation)
//
// Every transition is one conditional UPDATE with the expected state in its
// WHERE, and is audited in the same transaction. An action is executed with
// a stable action id ("recon/<discrepancy>/<generation>") in the transaction
// that marks it executed, so it takes effect once however many operators or
// retries execute it at the same time.
//
// Approvals are a capability of their own (Approvals): any module asks for
// a second operator's decision on an action of a kind it registers
// (inventory adjustments, payment compensations), and the requester cannot
// approve or reject their own request, also enforced in the UPDATE.
package keelrecon
