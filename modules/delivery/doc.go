// Package delivery is Keel's SMS downstream delivery module: it pushes
// status reports and MO messages to customer applications over CMPP 2.0 /
// 3.0 (package cmpp, the gateway's server side) or HTTP, records every
// push as a delivery record, and lets operators requeue records singly, by
// the selection of a page, or in bulk through a background task built on
// the engine's batches.
//
// A delivery record moves through
//
//	pending → awaiting_ack → delivered            valid success ACK
//	                       → rejected             ACK non-zero or naming another Msg_Id
//	                       → unconfirmed          no ACK before the deadline
//	pending → failed                              the gateway call failed
//	pending | failed | unconfirmed | rejected | delivered → pending   requeue
//
// and every move is one conditional UPDATE naming the status and either
// the version the caller decided on or the send token of the attempt it
// concludes. Each push is an engine job whose flow key is the application
// ("app:<id>"): with no live connection it waits (keel.WaitConnection) and
// is woken when the customer connects; written, it waits for the ACK
// (keel.WaitACK) until the deadline; the ACK handler concludes the record
// and wakes the job, which completes or fails from the record's final
// state. Jobs are claimed only by an instance that holds a live connection
// of their application (keel.QueueConfig.FlowKeys), or, when no instance
// does, by any instance, which parks them waiting for the connection.
//
// # Layout
//
// Leaves that need nothing of the module are packages of their own:
//
//	cmpp                the gateway's CMPP 2.0 / 3.0 server (wire, sessions, windows)
//	httppush            the HTTP push adapter: signed JSON batches, per-item verdicts
//	carrierlink         the link to the carrier: submits up, reports and MO down
//	sim                 simulators of both ends: a carrier, and customers (gocmpp)
//	internal/cmppclient the client side of CMPP, shared by carrierlink and sim
//
// The rest needs the module's types and stays in this package, its files
// named for their layer:
//
//	domain_*   records, statuses, filters, customers; the state decisions
//	store_*    every statement (queries/<dialect>/*.sql), behind the store type
//	push_*     one push: claim, write, wait for the ACK, conclude; HTTP glue
//	cmpp_*     the gateway's side of CMPP: links, presence of connections
//	jobs_*     engine jobs: pushes, the requeue task and its batch source, ingestion
//	web_*      API, console pages, labels
//	sim_*      the demo and the carrier_sim setting, which run package sim
//	module*, descriptor, settings, metrics: wiring into the host
//
// The load harness (RunLoad, BenchmarkLoad200) is in the test files: it
// seeds through the store, and keeping it there keeps it out of the API.
//
// See docs/delivery.md for the design, the requeue task (preview, snapshot,
// speed, pause and resume, terminate, item verdicts), the API, and how each
// known gap of the previous system is closed.
package delivery
