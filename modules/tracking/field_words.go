package tracking

import (
	"github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/modules/tracking/domain"
)

// fieldWords name the fields the module writes in reconciliation evidence
// and in its change events, so the console says 节点 where the JSON says
// milestone. TestEvidenceFieldsHaveWords walks the source.
var fieldWords = map[string][2]string{
	"milestone":           {"节点", "Milestone"},
	"seq":                 {"序号", "Sequence"},
	"event_key":           {"事件键", "Event key"},
	"revision":            {"版本", "Revision"},
	"from_revision":       {"原版本", "From revision"},
	"open_gaps":           {"未补缺口", "Open gaps"},
	"highest_trusted_seq": {"最大可信序号", "Highest trusted sequence"},
	"applied_regressions": {"已应用的回退", "Applied regressions"},
	"events":              {"事件数", "Events"},
	"advances":            {"推进次数", "Advances"},
	"answered_at":         {"承运商答复时间", "Carrier answered at"},
	"carrier":             {"承运商", "Carrier"},
	"waybill":             {"运单号", "Waybill"},
	"raw_id":              {"原始记录", "Raw record"},
	"gap_closed":          {"补上缺口", "Gap closed"},
	"mapping_version":     {"映射版本", "Mapping version"},
	"occurred_at":         {"发生时间", "Occurred at"},
	"steps":               {"步骤", "Step"},
	"gaps_opened":         {"新开缺口", "Gaps opened"},
	// The evidence's sources beside ours and the carrier's answer.
	"evidence": {"原始事件", "Raw events"},
}

func init() {
	web.RegisterFields(Name, fieldWords)
	ms := map[string][2]string{}
	for _, m := range domain.Milestones {
		ms[string(m)] = [2]string{m.Word("zh"), m.Word("en")}
	}
	web.RegisterFieldValues(Name, "milestone", ms)
}
