package smpp

import "fmt"

// CommandID is the command_id of a PDU header. A response is its request
// with the high bit set.
type CommandID uint32

// The SMPP 3.4 command set. Only bind, unbind, enquire_link, generic_nack,
// submit_sm and deliver_sm (and their responses) are decoded; the others
// are named so logs can say what a peer sent.
const (
	CmdGenericNack         CommandID = 0x80000000
	CmdBindReceiver        CommandID = 0x00000001
	CmdBindReceiverResp    CommandID = 0x80000001
	CmdBindTransmitter     CommandID = 0x00000002
	CmdBindTransmitterResp CommandID = 0x80000002
	CmdQuerySM             CommandID = 0x00000003
	CmdSubmitSM            CommandID = 0x00000004
	CmdSubmitSMResp        CommandID = 0x80000004
	CmdDeliverSM           CommandID = 0x00000005
	CmdDeliverSMResp       CommandID = 0x80000005
	CmdUnbind              CommandID = 0x00000006
	CmdUnbindResp          CommandID = 0x80000006
	CmdReplaceSM           CommandID = 0x00000007
	CmdCancelSM            CommandID = 0x00000008
	CmdBindTransceiver     CommandID = 0x00000009
	CmdBindTransceiverResp CommandID = 0x80000009
	CmdOutbind             CommandID = 0x0000000B
	CmdEnquireLink         CommandID = 0x00000015
	CmdEnquireLinkResp     CommandID = 0x80000015
	CmdSubmitMulti         CommandID = 0x00000021
	CmdAlertNotification   CommandID = 0x00000102
	CmdDataSM              CommandID = 0x00000103
)

// respBit marks a response command_id.
const respBit CommandID = 0x80000000

// IsResponse reports whether c is a response (generic_nack included).
func (c CommandID) IsResponse() bool { return c&respBit != 0 }

// Response is the command_id answering request c.
func (c CommandID) Response() CommandID { return c | respBit }

var commandNames = map[CommandID]string{
	CmdGenericNack: "generic_nack", CmdQuerySM: "query_sm",
	CmdBindReceiver: "bind_receiver", CmdBindReceiverResp: "bind_receiver_resp",
	CmdBindTransmitter: "bind_transmitter", CmdBindTransmitterResp: "bind_transmitter_resp",
	CmdBindTransceiver: "bind_transceiver", CmdBindTransceiverResp: "bind_transceiver_resp",
	CmdSubmitSM: "submit_sm", CmdSubmitSMResp: "submit_sm_resp",
	CmdDeliverSM: "deliver_sm", CmdDeliverSMResp: "deliver_sm_resp",
	CmdUnbind: "unbind", CmdUnbindResp: "unbind_resp",
	CmdReplaceSM: "replace_sm", CmdCancelSM: "cancel_sm", CmdOutbind: "outbind",
	CmdEnquireLink: "enquire_link", CmdEnquireLinkResp: "enquire_link_resp",
	CmdSubmitMulti: "submit_multi", CmdAlertNotification: "alert_notification", CmdDataSM: "data_sm",
}

func (c CommandID) String() string {
	if n, ok := commandNames[c]; ok {
		return n
	}
	return fmt.Sprintf("0x%08x", uint32(c))
}

// newPDU returns an empty PDU for a command this package decodes.
func newPDU(c CommandID) PDU {
	switch c {
	case CmdBindReceiver, CmdBindTransmitter, CmdBindTransceiver:
		return &Bind{Type: bindTypeOf(c)}
	case CmdBindReceiverResp, CmdBindTransmitterResp, CmdBindTransceiverResp:
		return &BindResp{Type: bindTypeOf(c &^ respBit)}
	case CmdSubmitSM:
		return &SubmitSM{}
	case CmdSubmitSMResp:
		return &SubmitSMResp{}
	case CmdDeliverSM:
		return &DeliverSM{}
	case CmdDeliverSMResp:
		return &DeliverSMResp{}
	}
	return newControlPDU(c)
}

func newControlPDU(c CommandID) PDU {
	switch c {
	case CmdUnbind:
		return &Unbind{}
	case CmdUnbindResp:
		return &UnbindResp{}
	case CmdEnquireLink:
		return &EnquireLink{}
	case CmdEnquireLinkResp:
		return &EnquireLinkResp{}
	case CmdGenericNack:
		return &GenericNack{}
	}
	return nil
}
