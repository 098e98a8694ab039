package smpp

// bodyForm records how a response's body appeared on the wire, so that
// decoding and re-encoding give back the same bytes. The zero value
// follows the rule this package writes by: an error response whose id
// field is empty carries no body (SMPP 3.4 says so for submit_sm_resp and
// intends it for every error response), anything else carries it.
// Peers differ here, so decoding accepts both forms.
type bodyForm uint8

const (
	bodyByRule  bodyForm = iota
	bodyPresent          // written though the rule would omit it
	bodyAbsent           // omitted though the rule would write it
)

func ruleWritesBody(status uint32, id string) bool { return status == 0 || id != "" }

// present reports whether to write the body. A set id is never dropped.
func (f bodyForm) present(status uint32, id string) bool {
	switch f {
	case bodyPresent:
		return true
	case bodyAbsent:
		return id != ""
	}
	return ruleWritesBody(status, id)
}

// decoded is the form that reproduces what was read.
func (bodyForm) decoded(present bool, status uint32, id string) bodyForm {
	switch {
	case present == ruleWritesBody(status, id):
		return bodyByRule
	case present:
		return bodyPresent
	}
	return bodyAbsent
}

// maxMessageID is the message_id limit, NUL included.
const maxMessageID = 65

// SubmitSMResp answers submit_sm with the SMSC's message_id (at most 64
// bytes). An error response normally has no MessageID and no body.
type SubmitSMResp struct {
	Status    uint32
	MessageID string
	body      bodyForm
}

// Command implements PDU.
func (*SubmitSMResp) Command() CommandID { return CmdSubmitSMResp }

func (p *SubmitSMResp) status() uint32     { return p.Status }
func (p *SubmitSMResp) setStatus(s uint32) { p.Status = s }

func (p *SubmitSMResp) encode(e *encoder) { encodeIDBody(e, p.body, p.Status, p.MessageID) }

func (p *SubmitSMResp) decode(d *decoder) { p.MessageID, p.body = decodeIDBody(d, p.Status) }

// DeliverSMResp is the ESME's answer to deliver_sm: Status 0 is the
// acknowledgement, anything else a refusal. MessageID is unused by SMPP
// 3.4 and normally empty.
type DeliverSMResp struct {
	Status    uint32
	MessageID string
	body      bodyForm
}

// Command implements PDU.
func (*DeliverSMResp) Command() CommandID { return CmdDeliverSMResp }

func (p *DeliverSMResp) status() uint32     { return p.Status }
func (p *DeliverSMResp) setStatus(s uint32) { p.Status = s }

func (p *DeliverSMResp) encode(e *encoder) { encodeIDBody(e, p.body, p.Status, p.MessageID) }

func (p *DeliverSMResp) decode(d *decoder) { p.MessageID, p.body = decodeIDBody(d, p.Status) }

func encodeIDBody(e *encoder, f bodyForm, status uint32, id string) {
	if f.present(status, id) {
		e.cstr("message_id", id, maxMessageID)
	}
}

func decodeIDBody(d *decoder, status uint32) (string, bodyForm) {
	if d.left() == 0 {
		return "", bodyByRule.decoded(false, status, "")
	}
	id := d.cstr("message_id", StatusInvMsgID, maxMessageID)
	return id, bodyByRule.decoded(true, status, id)
}
