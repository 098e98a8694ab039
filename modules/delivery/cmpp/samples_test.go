package cmpp_test

import (
	"github.com/keelwork/keel/modules/delivery/cmpp"
)

var versions = []cmpp.Version{cmpp.V20, cmpp.V30}

// samplePDUs returns one PDU of every type with every field set that the
// version's layout has.
func samplePDUs(v cmpp.Version) []cmpp.PDU {
	return []cmpp.PDU{
		&cmpp.Connect{SourceAddr: "901234", AuthenticatorSource: [16]byte{1, 2, 3}, Version: v, Timestamp: 1021080510},
		&cmpp.ConnectResp{Status: 3, AuthenticatorISMG: [16]byte{9, 8, 7}, Version: v},
		sampleSubmit(v),
		&cmpp.SubmitResp{MsgID: 0x1234567890abcdef, Result: 8},
		sampleMO(v),
		sampleReportDeliver(v, 0),
		&cmpp.DeliverResp{MsgID: 0x0fedcba987654321, Result: 9},
		&cmpp.ActiveTest{},
		&cmpp.ActiveTestResp{Reserved: 1},
		&cmpp.Terminate{},
		&cmpp.TerminateResp{},
	}
}

func sampleSubmit(v cmpp.Version) *cmpp.Submit {
	s := &cmpp.Submit{
		PkTotal: 1, PkNumber: 1, RegisteredDelivery: 1, MsgLevel: 2,
		ServiceID: "TEST", FeeUserType: 2, FeeTerminalID: "13500000000",
		TPPID: 0, TPUDHI: 0, MsgFmt: cmpp.FmtUCS2,
		MsgSrc: "901234", FeeType: "02", FeeCode: "10",
		ValidTime: "151105131555101+", AtTime: "", SrcID: "1069000001",
		DestTerminalIDs: []string{"13500002696", "13800138000"},
		Content:         []byte{0x4f, 0x60, 0x59, 0x7d},
	}
	if v == cmpp.V30 {
		s.FeeTerminalType, s.DestTerminalType, s.LinkID = 1, 1, "LINK-7"
	} else {
		s.Reserve = "RSV"
	}
	return s
}

func sampleMO(v cmpp.Version) *cmpp.Deliver {
	d := &cmpp.Deliver{
		MsgID: 0x5000000000000001, DestID: "106900001234", ServiceID: "TEST",
		MsgFmt: cmpp.FmtUCS2, SrcTerminalID: "13500002696",
		Content: []byte{0x4f, 0x60, 0x59, 0x7d},
	}
	if v == cmpp.V30 {
		d.SrcTerminalType, d.LinkID = 1, "LINK-9"
	} else {
		d.Reserve = "R"
	}
	return d
}

func sampleReportDeliver(v, layout cmpp.Version) *cmpp.Deliver {
	d := sampleMO(v)
	d.Content, d.MsgFmt = nil, 0
	d.Report = &cmpp.Report{
		MsgID: 0x6000000000000002, Stat: cmpp.StatDelivered,
		SubmitTime: "2608141530", DoneTime: "2608141531",
		DestTerminalID: "13500002696", SMSCSequence: 42, Layout: layout,
	}
	if layout == 0 {
		d.Report.Layout = v
	}
	return d
}
