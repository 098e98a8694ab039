// Package keelevents is Keel's events backbone: a transactional outbox
// (EmitTx writes an event in the caller's transaction), a relay that
// publishes committed events at least once and in order per key from any
// number of instances (partitions of the key space held by fenced leases),
// a Bus interface with an in-database implementation (JetStream lives in
// keelevents/jetstream), and an inbox that gives each consumer's handler the
// event and a transaction in which its dedupe proof commits with its effect.
//
// The database is the authority throughout: a bus only carries and wakes.
// See docs/events.md.
package keelevents
