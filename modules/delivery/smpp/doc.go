// Package smpp is the server side of SMPP 3.4 (Short Message Peer to
// Peer): the SMSC that customers' ESMEs bind to, submit messages on and
// receive delivery receipts and MO messages from. Its API has the shape
// of package cmpp's (Server, Conn, Handler, a window of unanswered
// deliveries, an ack timeout and the same optional handler interfaces),
// so the delivery module can serve both protocols through one adapter.
//
// # Codec
//
// Every PDU is a 16-byte big-endian header (command_length, command_id,
// command_status, sequence_number) and a body. Decode is strict: exact
// lengths, C-Octet Strings NUL-terminated within their limits, sm_length
// at most 254 and matching the bytes present, TLVs complete, unrepeated
// and of the length their tag allows, at most MaxPDUSize bytes. A
// failure is a *DecodeError naming the field and the command_status to
// answer it with; Decode never panics. Encode refuses values that do not
// fit instead of truncating them. TLVs keep their wire order and response
// bodies their presence, so decoding and re-encoding reproduce the bytes.
//
// A delivery receipt is a deliver_sm with esm_class 0x04, the appendix B
// text in short_message and the receipted_message_id and message_state
// TLVs (Receipt.DeliverSM, DeliverSM.Receipt).
//
// # Server
//
// A connection must bind first (transmitter, receiver or transceiver);
// Config.Authenticate checks system_id and password. Each bound
// connection has one reader loop and one writer goroutine. submit_sm is
// handled concurrently up to the window and answered with a message_id
// from MessageIDGenerator. Conn.Deliver sends deliver_sm under a window
// of unanswered requests; responses are matched by sequence number, and
// a missing one frees its slot after AckTimeout and is reported apart
// from a refusing status. enquire_link runs both ways. See docs/smpp.md
// for what is and is not supported.
package smpp
