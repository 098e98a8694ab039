package web

import (
	"time"

	"github.com/keelwork/keel/keeltype"
)

// Lang is "zh" (the default) or "en".
func Lang(s string) string {
	if s == "en" {
		return "en"
	}
	return "zh"
}

func pick(lang string, w [2]string, ok bool, raw string) string {
	if !ok {
		return raw
	}
	if lang == "en" {
		return w[1]
	}
	return w[0]
}

// outcomeWords are the one translation of the engine's item outcomes.
var outcomeWords = map[keeltype.BatchOutcome][2]string{
	keeltype.OutcomeQueued:             {"排队中", "Queued"},
	keeltype.OutcomeProcessing:         {"处理中", "Processing"},
	keeltype.OutcomeWaitingConnection:  {"等待连接", "Waiting for connection"},
	keeltype.OutcomeWaitingExternalACK: {"等待外部 ACK", "Waiting for another channel's ACK"},
	keeltype.OutcomeWaitingACK:         {"等待 ACK", "Waiting for ACK"},
	keeltype.OutcomeWaiting:            {"等待中", "Waiting"},
	keeltype.OutcomeSuccess:            {"成功", "Succeeded"},
	keeltype.OutcomeFailed:             {"失败", "Failed"},
	keeltype.OutcomeSkipped:            {"跳过", "Skipped"},
	keeltype.OutcomeUnprocessed:        {"未处理", "Unprocessed"},
}

// batchStateWords are the one translation of the engine's task states.
var batchStateWords = map[keeltype.BatchState][2]string{
	keeltype.BatchQueued:           {"排队中", "Queued"},
	keeltype.BatchRunning:          {"执行中", "Running"},
	keeltype.BatchPaused:           {"已暂停", "Paused"},
	keeltype.BatchCompleted:        {"已完成", "Completed"},
	keeltype.BatchPartialCompleted: {"部分完成", "Partially completed"},
	keeltype.BatchTerminated:       {"已终止", "Terminated"},
}

// OutcomeWord names an item outcome in lang (the raw value if unknown).
func OutcomeWord(lang string, o keeltype.BatchOutcome) string {
	w, ok := outcomeWords[o]
	return pick(lang, w, ok, string(o))
}

// BatchStateWord names a task state in lang.
func BatchStateWord(lang string, s keeltype.BatchState) string {
	w, ok := batchStateWords[s]
	return pick(lang, w, ok, string(s))
}

// DisplayZone is the zone the console shows times in: operators read
// Beijing time. Times are stored and exchanged (API, CLI) in UTC.
var DisplayZone = time.FixedZone("UTC+8", 8*3600)

// TimeLayout is how the console prints a time; ZoneLabel follows it.
const TimeLayout = "2006-01-02 15:04:05"

// ZoneLabel names DisplayZone next to a time or in a column head.
func ZoneLabel(lang string) string {
	return pick(lang, [2]string{"北京时间", "Beijing time (UTC+8)"}, true, "")
}

// Time formats t in DisplayZone ("—" for the zero time).
func Time(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(DisplayZone).Format(TimeLayout)
}
