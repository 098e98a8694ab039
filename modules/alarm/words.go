package alarm

import (
	"strconv"
	"strings"
)

// StateZH names a state in the operator's words.
func StateZH(s string) string {
	switch s {
	case StNormal:
		return "正常"
	case StPending:
		return "待确认"
	case StFiring:
		return "告警中"
	case StAcked:
		return "已确认"
	case StRecovered:
		return "已恢复"
	case StNoData:
		return "无数据"
	}
	return "未知状态"
}

// StateEN is StateZH in English.
func StateEN(s string) string {
	switch s {
	case StNormal:
		return "normal"
	case StPending:
		return "pending"
	case StFiring:
		return "firing"
	case StAcked:
		return "acknowledged"
	case StRecovered:
		return "recovered"
	case StNoData:
		return "no data"
	}
	return "unknown"
}

// SeverityZH names a severity.
func SeverityZH(s int) string {
	switch s {
	case SevSevere:
		return "严重"
	case SevMinor:
		return "一般"
	case SevInfo:
		return "提示"
	}
	return "—"
}

// SeverityEN is SeverityZH in English.
func SeverityEN(s int) string {
	switch s {
	case SevSevere:
		return "severe"
	case SevMinor:
		return "minor"
	case SevInfo:
		return "info"
	}
	return "-"
}

// NoticeStateZH names a notice's state.
func NoticeStateZH(s string) string {
	return map[string]string{"pending": "待发送", "held": "风暴暂存", "sent": "已送达", "muted": "已静默", "merged": "已合并为摘要",
		"escalated": "已升级为值班工单"}[s]
}

// NoticeKindZH names a notice's type.
func NoticeKindZH(s string) string {
	return map[string]string{"firing": "触发", "escalated": "升级", "recovered": "恢复", "group": "窗口汇总", "summary": "风暴后摘要",
		"storm": "告警风暴"}[s]
}

// historyReasons are the words of the reasons the module writes into an
// instance's history (process.go, module.go); "severity_N" is said with
// the level's words.
var historyReasons = map[string][2]string{
	"threshold":        {"超过阈值", "crossed the threshold"},
	"recovery_windows": {"连续恢复窗口达标", "back to normal for the required windows"},
	"data_resumed":     {"数据恢复上报", "data came back"},
	"no_data":          {"超时没有数据", "no data in time"},
	"ack":              {"人工确认", "acknowledged by an operator"},
}

// HistoryReason says a history row's reason in lang; one the module did
// not write (a newer version's) reads as stored.
func HistoryReason(lang, s string) string {
	if w, ok := historyReasons[s]; ok {
		if lang == "en" {
			return w[1]
		}
		return w[0]
	}
	if n, ok := strings.CutPrefix(s, "severity_"); ok {
		if lvl, err := strconv.Atoi(n); err == nil {
			if lang == "en" {
				return "severity changed to " + SeverityEN(lvl)
			}
			return "级别变为" + SeverityZH(lvl)
		}
	}
	return s
}
