package alarm

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
