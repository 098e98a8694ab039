package smpp

import (
	"bytes"
	"fmt"
)

// tlvRule is the value size a tag allows (SMPP 3.4 section 5.3.2).
// cstr values must end in their only NUL.
type tlvRule struct {
	min, max int
	cstr     bool
}

func fixed(n int) tlvRule { return tlvRule{min: n, max: n} }

var tlvRules = map[Tag]tlvRule{
	0x0005:                fixed(1),                       // dest_addr_subunit
	0x0006:                fixed(1),                       // dest_network_type
	0x0007:                fixed(1),                       // dest_bearer_type
	0x0008:                fixed(2),                       // dest_telematics_id
	0x000D:                fixed(1),                       // source_addr_subunit
	0x000E:                fixed(1),                       // source_network_type
	0x000F:                fixed(1),                       // source_bearer_type
	0x0010:                fixed(1),                       // source_telematics_id
	0x0017:                fixed(4),                       // qos_time_to_live
	0x0019:                fixed(1),                       // payload_type
	0x001D:                {min: 1, max: 256, cstr: true}, // additional_status_info_text
	TagReceiptedMessageID: {min: 1, max: 65, cstr: true},
	0x0030:                fixed(1),          // ms_msg_wait_facilities
	0x0201:                fixed(1),          // privacy_indicator
	0x0202:                {min: 2, max: 23}, // source_subaddress
	0x0203:                {min: 2, max: 23}, // dest_subaddress
	TagUserMessageRef:     fixed(2),
	0x0205:                fixed(1), // user_response_code
	0x020A:                fixed(2), // source_port
	0x020B:                fixed(2), // destination_port
	TagSARMsgRefNum:       fixed(2),
	0x020D:                fixed(1), // language_indicator
	TagSARTotalSegments:   fixed(1),
	TagSARSegmentSeqnum:   fixed(1),
	TagSCInterfaceVersion: fixed(1),
	0x0302:                fixed(1),          // callback_num_pres_ind
	0x0303:                {min: 0, max: 65}, // callback_num_atag
	0x0304:                fixed(1),          // number_of_messages
	0x0381:                {min: 4, max: 19}, // callback_num
	0x0420:                fixed(1),          // dpf_result
	0x0421:                fixed(1),          // set_dpf
	0x0422:                fixed(1),          // ms_availability_status
	TagNetworkErrorCode:   fixed(3),
	TagMessagePayload:     {min: 0, max: MaxPDUSize},
	0x0425:                fixed(1), // delivery_failure_reason
	0x0426:                fixed(1), // more_messages_to_send
	TagMessageState:       fixed(1),
	0x0501:                fixed(1), // ussd_service_op
	0x1201:                fixed(1), // display_time
	0x1203:                fixed(2), // sms_signal
	0x1204:                fixed(1), // ms_validity
	0x130C:                fixed(0), // alert_on_message_delivery
	0x1380:                fixed(1), // its_reply_type
	0x1383:                fixed(2), // its_session_info
}

// checkTLV applies the tag's rule; tags outside the table (reserved or
// vendor-specific) may hold any value that fits the 16-bit length.
func checkTLV(tag Tag, v []byte) error {
	if len(v) > 0xFFFF {
		return fmt.Errorf("%w: TLV %#04x value is %d bytes", ErrMalformed, uint16(tag), len(v))
	}
	r, ok := tlvRules[tag]
	if !ok {
		return nil
	}
	if len(v) < r.min || len(v) > r.max {
		return fmt.Errorf("%w: TLV %#04x is %d bytes, allowed %d to %d", ErrMalformed, uint16(tag), len(v), r.min, r.max)
	}
	if r.cstr && bytes.IndexByte(v, 0) != len(v)-1 {
		return fmt.Errorf("%w: TLV %#04x is not one NUL-terminated string", ErrMalformed, uint16(tag))
	}
	return nil
}
