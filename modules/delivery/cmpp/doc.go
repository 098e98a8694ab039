// Package cmpp is the server side of CMPP 2.0 and 3.0 (China Mobile Peer
// to Peer), the protocol customers (SPs) use to reach the SMS gateway
// (the ISMG): they connect, authenticate, submit messages, and receive
// status reports and MO messages as DELIVERs over the same connection.
//
// # Codec
//
// Every PDU is a 12-byte big-endian header (Total_Length, Command_Id,
// Sequence_Id) and a body whose layout depends on the version the client
// announced in CONNECT: 0x20 and 0x21 use the 2.0 layouts, 0x30 the 3.0
// ones. The differences: CONNECT_RESP Status and SUBMIT_RESP/DELIVER_RESP
// Result are 1 byte in 2.0 and 4 in 3.0; terminal numbers are 21 bytes in
// 2.0 and 32 in 3.0; 3.0 adds terminal-type bytes and a 20-byte LinkID
// where 2.0 has an 8-byte reserve. Decode is strict (exact lengths, no
// trailing bytes, a per-version maximum PDU size) and never panics;
// Encode refuses values that do not fit instead of truncating them.
// Fixed-width strings lose only their trailing NUL padding, so decoding
// and re-encoding reproduces the wire bytes.
//
// A status report travels in Msg_Content of a DELIVER with
// Registered_Delivery = 1: Msg_Id 8, Stat 7, Submit_time 10, Done_time 10,
// Dest_terminal_Id 21 or 32, SMSC_sequence 4 — 60 bytes in the 2.0 layout,
// 71 in the 3.0 one. Widely used client libraries parse 3.0 reports with
// the 60-byte layout, so Account.ReportLayout can force either layout per
// application; decoding picks the layout from the length.
//
// # Msg_Id
//
// Msg_Id packs month 4, day 5, hour 5, minute 6, second 6 bits, the
// 22-bit gateway id and a 16-bit per-second sequence (MsgIDGenerator).
//
// # Server
//
// A connection authenticates with MD5(Source_Addr + 9 zero bytes + secret
// + MMDDHHMMSS) checked against the timestamp in the packet; the server
// proves itself with MD5(Status + AuthenticatorSource + secret). Each
// connection has one reader loop and one writer goroutine. SUBMITs are
// handled concurrently up to the window and answered with a Msg_Id from
// the server's generator. Conn.Deliver sends DELIVERs under a window of
// unanswered requests; DELIVER_RESPs are matched by sequence id, and a
// missing one frees its slot after AckTimeout and is reported apart from
// a negative Result. Link tests run both ways. See docs/cmpp.md for what
// is and is not supported.
package cmpp
