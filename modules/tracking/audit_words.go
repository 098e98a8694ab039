package tracking

import (
	"github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/modules/tracking/ingest"
)

// The words of the audit actions and system actors this module writes
// (the console's audit log shows them; a test checks every action the
// source writes has words).
func init() {
	web.RegisterReasons(Name, web.SystemReason{Text: `initial mapping from configuration`, ZH: "按配置建立的初始映射", EN: "Initial mapping from the configuration"})
	web.RegisterTopics(map[string][2]string{
		ingest.TopicChanged: {"运单状态变化", "Waybill changed"},
		ingest.TopicDetail:  {"运单轨迹明细", "Waybill detail"},
	})
	web.RegisterReconcilers(map[string][2]string{ReconName: {"运单与承运商核对", "Waybills against the carrier"}})
	web.RegisterJobKinds(map[string][2]string{
		"tracking.backfill": {"补拉缺失的轨迹", "Fetch a missing tracking event"},
		"tracking.realtime": {"实时查询运单", "Query a waybill now"},
		"tracking.verify":   {"向承运商核对运单", "Check a waybill with its carrier"},
	})
	web.RegisterQueues(map[string][2]string{
		"tracking": {"承运商查询", "Carrier queries"},
	})
	web.RegisterActions(map[string][2]string{
		"tracking.mapping.create":   {"新建承运商状态映射", "Create a carrier status mapping"},
		"tracking.mapping.activate": {"启用承运商状态映射", "Activate a carrier status mapping"},
	})
	web.RegisterSystemActors(map[string][2]string{
		"system:tracking": {"系统（物流跟踪）", "system (tracking)"},
	})
}
