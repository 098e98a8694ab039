// Package sim holds the delivery module's simulators, the two ends a
// delivery platform talks to, each over real CMPP:
//
//   - Carrier: the upstream carrier (an ISMG). The platform's carrier link
//     connects to it, submits, and gets a status report per destination
//     after a delay, with a configurable mix of outcomes, plus MO messages
//     on demand.
//   - Customer: a customer application connected to the platform's gateway
//     through gocmpp, the client library real customers use. It records
//     every DELIVER it receives and answers as its policy says.
//
// The demo (`keel dev`), the delivery.carrier_sim setting and the module's
// tests run them; nothing in production depends on them.
package sim
