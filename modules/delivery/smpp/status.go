package smpp

import "fmt"

// command_status values of SMPP 3.4 (section 5.1.3). Each constant is the
// specification's ESME_R mnemonic in Go case: ESME_RINVPASWD is
// StatusInvPaswd.
const (
	StatusOK              uint32 = 0x00
	StatusInvMsgLen       uint32 = 0x01 // message length is invalid
	StatusInvCmdLen       uint32 = 0x02 // command length is invalid
	StatusInvCmdID        uint32 = 0x03 // invalid command id
	StatusInvBndSts       uint32 = 0x04 // incorrect bind status for the command
	StatusAlyBnd          uint32 = 0x05 // already bound
	StatusInvPrtFlg       uint32 = 0x06 // invalid priority flag
	StatusInvRegDlvFlg    uint32 = 0x07 // invalid registered delivery flag
	StatusSysErr          uint32 = 0x08 // system error
	StatusInvSrcAdr       uint32 = 0x0A // invalid source address
	StatusInvDstAdr       uint32 = 0x0B // invalid destination address
	StatusInvMsgID        uint32 = 0x0C // message id is invalid
	StatusBindFail        uint32 = 0x0D // bind failed
	StatusInvPaswd        uint32 = 0x0E // invalid password
	StatusInvSysID        uint32 = 0x0F // invalid system id
	StatusMsgQFul         uint32 = 0x14 // message queue full
	StatusInvSerTyp       uint32 = 0x15 // invalid service type
	StatusInvEsmClass     uint32 = 0x43 // invalid esm_class
	StatusSubmitFail      uint32 = 0x45 // submit_sm failed
	StatusInvSrcTON       uint32 = 0x48 // invalid source address TON
	StatusInvSrcNPI       uint32 = 0x49 // invalid source address NPI
	StatusInvDstTON       uint32 = 0x50 // invalid destination address TON
	StatusInvDstNPI       uint32 = 0x51 // invalid destination address NPI
	StatusInvSysTyp       uint32 = 0x53 // invalid system_type
	StatusThrottled       uint32 = 0x58 // throttling error
	StatusInvSched        uint32 = 0x61 // invalid scheduled delivery time
	StatusInvExpiry       uint32 = 0x62 // invalid validity period
	StatusXTAppn          uint32 = 0x64 // ESME receiver temporary application error
	StatusXPAppn          uint32 = 0x65 // ESME receiver permanent application error
	StatusXRAppn          uint32 = 0x66 // ESME receiver reject message error
	StatusInvOptParStream uint32 = 0xC0 // error in the optional part of the PDU body
	StatusOptParNotAllwd  uint32 = 0xC1 // optional parameter not allowed
	StatusInvParLen       uint32 = 0xC2 // invalid parameter length
	StatusMissingOptParam uint32 = 0xC3 // expected optional parameter missing
	StatusInvOptParamVal  uint32 = 0xC4 // invalid optional parameter value
	StatusDeliveryFailure uint32 = 0xFE // delivery failure (data_sm_resp)
	StatusUnknownErr      uint32 = 0xFF // unknown error
)

var statusNames = map[uint32]string{
	StatusOK: "ESME_ROK", StatusInvMsgLen: "ESME_RINVMSGLEN", StatusInvCmdLen: "ESME_RINVCMDLEN",
	StatusInvCmdID: "ESME_RINVCMDID", StatusInvBndSts: "ESME_RINVBNDSTS", StatusAlyBnd: "ESME_RALYBND",
	StatusInvPrtFlg: "ESME_RINVPRTFLG", StatusInvRegDlvFlg: "ESME_RINVREGDLVFLG", StatusSysErr: "ESME_RSYSERR",
	StatusInvSrcAdr: "ESME_RINVSRCADR", StatusInvDstAdr: "ESME_RINVDSTADR", StatusInvMsgID: "ESME_RINVMSGID",
	StatusBindFail: "ESME_RBINDFAIL", StatusInvPaswd: "ESME_RINVPASWD", StatusInvSysID: "ESME_RINVSYSID",
	StatusMsgQFul: "ESME_RMSGQFUL", StatusInvSerTyp: "ESME_RINVSERTYP", StatusInvEsmClass: "ESME_RINVESMCLASS",
	StatusSubmitFail: "ESME_RSUBMITFAIL", StatusInvSrcTON: "ESME_RINVSRCTON", StatusInvSrcNPI: "ESME_RINVSRCNPI",
	StatusInvDstTON: "ESME_RINVDSTTON", StatusInvDstNPI: "ESME_RINVDSTNPI", StatusInvSysTyp: "ESME_RINVSYSTYP",
	StatusThrottled: "ESME_RTHROTTLED", StatusInvSched: "ESME_RINVSCHED", StatusInvExpiry: "ESME_RINVEXPIRY",
	StatusXTAppn: "ESME_RX_T_APPN", StatusXPAppn: "ESME_RX_P_APPN", StatusXRAppn: "ESME_RX_R_APPN",
	StatusInvOptParStream: "ESME_RINVOPTPARSTREAM", StatusOptParNotAllwd: "ESME_ROPTPARNOTALLWD",
	StatusInvParLen: "ESME_RINVPARLEN", StatusMissingOptParam: "ESME_RMISSINGOPTPARAM",
	StatusInvOptParamVal: "ESME_RINVOPTPARAMVAL", StatusDeliveryFailure: "ESME_RDELIVERYFAILURE",
	StatusUnknownErr: "ESME_RUNKNOWNERR",
}

// StatusName is the specification's mnemonic for s (ESME_RINVPASWD), or
// its hex value for a status outside the table (vendor-specific ones).
func StatusName(s uint32) string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("0x%08x", s)
}
