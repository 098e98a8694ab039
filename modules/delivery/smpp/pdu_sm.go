package smpp

import "fmt"

// SubmitSM is submit_sm: an ESME's message for the SMSC to deliver.
type SubmitSM struct {
	Message
}

// Command implements PDU.
func (*SubmitSM) Command() CommandID { return CmdSubmitSM }

func (p *SubmitSM) encode(e *encoder) { p.Message.encode(e) }
func (p *SubmitSM) decode(d *decoder) { p.Message.decode(d) }

// DeliverSM is deliver_sm: an MO message or, with ESMClassReceipt, a
// delivery receipt (see Receipt). schedule_delivery_time and
// validity_period must be empty in a deliver_sm.
type DeliverSM struct {
	Message
}

// Command implements PDU.
func (*DeliverSM) Command() CommandID { return CmdDeliverSM }

func (p *DeliverSM) encode(e *encoder) {
	if p.ScheduleDeliveryTime != "" || p.ValidityPeriod != "" {
		e.failf("deliver_sm schedule_delivery_time and validity_period must be empty")
	}
	p.Message.encode(e)
}

func (p *DeliverSM) decode(d *decoder) {
	p.Message.decode(d)
	if p.ScheduleDeliveryTime != "" {
		d.fail("schedule_delivery_time", StatusInvSched, fmt.Errorf("%w: must be empty in deliver_sm", ErrMalformed))
	}
	if p.ValidityPeriod != "" {
		d.fail("validity_period", StatusInvExpiry, fmt.Errorf("%w: must be empty in deliver_sm", ErrMalformed))
	}
}
