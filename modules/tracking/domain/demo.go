package domain

import "time"

// DemoCarriers are the demo set `keel dev` runs against its simulators: a
// China-side consolidator (sequenced, with event ids), a postal ePacket
// route (no event ids, no sequence: fingerprints and the partial order)
// and an express carrier (sequenced, with event ids, a stricter reject
// status). Their secrets are demo values, public by design; pull URLs are
// filled in when the simulators start.
func DemoCarriers() []Carrier {
	return []Carrier{
		{Code: "cnhub", NameZH: "华南集运", NameEN: "CN Hub consolidator", Secrets: []string{"demo-cnhub-secret-2026"},
			Quota: 500, RealtimeShare: 300, BackfillShare: 200, Sequenced: true, Zone: "Asia/Shanghai", ZoneTrusted: true,
			Timeout: Duration(3 * time.Second),
			Codes: map[string]Milestone{"COLLECT": PickedUp, "EXPORT": Departed, "ARRIVE": Arrived, "CUSTOMS": Customs,
				"DELIVERING": OutForDelivery, "SIGNED": Delivered, "EXCEPT": Exception, "RETURN": Returned, "UNSIGN": DeliveryRevoked}},
		{Code: "epacket", NameZH: "邮政小包", NameEN: "Postal ePacket", Secrets: []string{"demo-epacket-secret-2026"},
			Quota: 100, RealtimeShare: 60, BackfillShare: 40, Sequenced: false, Zone: "Asia/Shanghai", ZoneTrusted: true,
			RejectStatus: 403,
			Codes: map[string]Milestone{"A": PickedUp, "E": Departed, "I": Arrived, "C": Customs, "D": OutForDelivery,
				"S": Delivered, "X": Exception, "R": Returned}},
		{Code: "swiftx", NameZH: "迅达国际快递", NameEN: "SwiftX Express", Secrets: []string{"demo-swiftx-secret-2026"},
			Quota: 300, RealtimeShare: 180, BackfillShare: 120, Sequenced: true, Zone: "UTC", ZoneTrusted: true,
			Codes: map[string]Milestone{"PU": PickedUp, "DEP": Departed, "ARR": Arrived, "CLR": Customs, "OFD": OutForDelivery,
				"DLV": Delivered, "EXC": Exception, "RTS": Returned, "DLV_REVOKED": DeliveryRevoked}},
	}
}
