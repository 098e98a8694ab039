package cmpp

import "fmt"

// CommandID is the Command_Id of a PDU header. A response is its request
// with the high bit set.
type CommandID uint32

// The commands this package encodes and decodes. QUERY, CANCEL and FWD are
// named so logs can say what a peer sent, but they are not supported.
const (
	CmdConnect        CommandID = 0x00000001
	CmdConnectResp    CommandID = 0x80000001
	CmdTerminate      CommandID = 0x00000002
	CmdTerminateResp  CommandID = 0x80000002
	CmdSubmit         CommandID = 0x00000004
	CmdSubmitResp     CommandID = 0x80000004
	CmdDeliver        CommandID = 0x00000005
	CmdDeliverResp    CommandID = 0x80000005
	CmdQuery          CommandID = 0x00000006
	CmdCancel         CommandID = 0x00000007
	CmdActiveTest     CommandID = 0x00000008
	CmdActiveTestResp CommandID = 0x80000008
	CmdFwd            CommandID = 0x00000009
)

var commandNames = map[CommandID]string{
	CmdConnect:        "CONNECT",
	CmdConnectResp:    "CONNECT_RESP",
	CmdTerminate:      "TERMINATE",
	CmdTerminateResp:  "TERMINATE_RESP",
	CmdSubmit:         "SUBMIT",
	CmdSubmitResp:     "SUBMIT_RESP",
	CmdDeliver:        "DELIVER",
	CmdDeliverResp:    "DELIVER_RESP",
	CmdQuery:          "QUERY",
	CmdCancel:         "CANCEL",
	CmdActiveTest:     "ACTIVE_TEST",
	CmdActiveTestResp: "ACTIVE_TEST_RESP",
	CmdFwd:            "FWD",
}

func (c CommandID) String() string {
	if n, ok := commandNames[c]; ok {
		return n
	}
	return fmt.Sprintf("0x%08x", uint32(c))
}
