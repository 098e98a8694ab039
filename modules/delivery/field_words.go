package delivery

import (
	"strings"

	"github.com/keelwork/keel/module/web"
)

// fieldWords name the fields of the module's job arguments and results
// (PushArgs, RequeueArgs, ForwardArgs, IngestArgs, itemResult), so the
// console's job page says 投递记录 where the JSON says delivery_id.
var fieldWords = map[string][2]string{
	"delivery_id":     {"投递记录", "Delivery record"},
	"app_id":          {"应用", "Application"},
	"kind":            {"记录类型", "Record kind"},
	"by":              {"发起方", "Requested by"},
	"frozen_status":   {"快照时的状态", "Status at the snapshot"},
	"frozen_version":  {"快照时的版本", "Version at the snapshot"},
	"snapshot_at":     {"快照时间", "Snapshot time"},
	"msg_id":          {"消息编号", "Message ID"},
	"upstream_msg_id": {"运营商消息编号", "Carrier message ID"},
	"stat":            {"运营商状态码", "Carrier status code"},
	"submit_time":     {"提交时间", "Submitted"},
	"done_time":       {"完成时间", "Done"},
	"dest":            {"接收号码", "Recipient"},
	"smsc_sequence":   {"短信中心序号", "SMSC sequence"},
	"received_at":     {"收到时间", "Received"},
	"record_status":   {"记录状态", "Record status"},
	"conn":            {"推送连接", "Push connection"},
	"deliver_msg_id":  {"推送消息编号", "Pushed message ID"},
}

func init() {
	web.RegisterFields(LineName, fieldWords)
	statuses, kinds := map[string][2]string{}, map[string][2]string{}
	for key, l := range labels {
		if s, ok := strings.CutPrefix(key, "status."); ok {
			statuses[s] = [2]string{l.zh, l.en}
		}
		if k, ok := strings.CutPrefix(key, "kind."); ok {
			kinds[k] = [2]string{l.zh, l.en}
		}
	}
	web.RegisterFieldValues(LineName, "record_status", statuses)
	web.RegisterFieldValues(LineName, "frozen_status", statuses)
	web.RegisterFieldValues(LineName, "kind", kinds)
	web.RegisterFieldValues(LineName, "by", map[string][2]string{"ingest": {"收到状态报告时", "On the status report's arrival"}})
}
