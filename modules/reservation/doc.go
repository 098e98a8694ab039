// Package reservation releases reservations whose holder did not show up.
//
// Resources (a workstation, a parking space, an experience slot, a service
// window) have time slots with a capacity. A reservation moves through
//
//	pending_payment → paid → checked_in
//	paid → released (no-show, automatic) → restored (appeal, while the slot is free)
//	paid | pending_payment → cancelled
//	pending_payment → expired (payment or waitlist-offer hold lapsed)
//	restored → checked_in
//
// and every move is one conditional UPDATE naming the state and version, with
// a history row (actor, reason) that is never deleted.
//
// When a reservation is paid its release point is fixed: start plus the
// grace minutes of its category (or of the category's time band containing
// the start, in the business time zone) and stored, indexed, as
// expected_release_at. Three paths release it, all through the same
// transaction shape (mark released, return capacity, promote the first
// waitlisted person, record the no-show, the notices and their events):
//
//   - a scheduled engine job at the release point (second precision;
//     idempotency key reservation+version, so a moved reservation reschedules);
//   - a periodic scan, the fallback that catches anything missed, claiming due
//     rows in bounded pages with FOR UPDATE SKIP LOCKED (one write transaction
//     on SQLite);
//   - a light release of one slot's due reservations whenever the slot's
//     availability is read (an assist, never the only path).
//
// Records that keep failing get retry_count and their error; an hourly
// compensation job re-processes them and dead-letters those past the maximum.
// Notifications (reminder, release notice, waitlist offer, restore notice) are
// rows of rsv_notification written in the same transaction with their event
// in the engine's events outbox (a reminder due later: with a scheduled job
// that emits it when due); the module's notifier consumer sends them through
// a Channel. A failed notification never undoes a release.
package reservation
