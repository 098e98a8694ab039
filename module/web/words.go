package web

import (
	"fmt"
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
	keeltype.OutcomeQueued:             {"排队", "Queued"},
	keeltype.OutcomeProcessing:         {"处理中", "Processing"},
	keeltype.OutcomeWaitingConnection:  {"等待连接", "Waiting for connection"},
	keeltype.OutcomeWaitingExternalACK: {"等待外部 ACK", "Waiting for another channel's ACK"},
	keeltype.OutcomeWaitingACK:         {"等待 ACK", "Waiting for ACK"},
	keeltype.OutcomeWaiting:            {"等待", "Waiting"},
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

// ZoneLabel names DisplayZone in a sentence ("times are in …").
func ZoneLabel(lang string) string {
	return pick(lang, [2]string{"北京时间", "Beijing time (UTC+8)"}, true, "")
}

// ZoneName names loc as a time column's head does: China's zone (Display
// Zone, Asia/Shanghai) is 北京时间 or UTC+8, UTC is UTC, any other zone
// its name and its offset now ("Asia/Tokyo UTC+9"). nil is DisplayZone.
func ZoneName(lang string, loc *time.Location) string {
	if loc == nil {
		loc = DisplayZone
	}
	name, off := time.Now().In(loc).Zone()
	switch {
	case off == 8*3600 && (loc == DisplayZone || loc.String() == "Asia/Shanghai" || loc.String() == "PRC" || name == "CST"):
		return pick(lang, [2]string{"北京时间", "UTC+8"}, true, "")
	case off == 0 && (loc == time.UTC || loc.String() == "UTC"):
		return "UTC"
	}
	if loc.String() == "" {
		return offsetName(off)
	}
	return loc.String() + " " + offsetName(off)
}

// offsetName is "UTC+8", "UTC-3:30", "UTC".
func offsetName(seconds int) string {
	sign := "+"
	if seconds < 0 {
		sign, seconds = "-", -seconds
	}
	h, m := seconds/3600, seconds%3600/60
	switch {
	case seconds == 0:
		return "UTC"
	case m == 0:
		return fmt.Sprintf("UTC%s%d", sign, h)
	}
	return fmt.Sprintf("UTC%s%d:%02d", sign, h, m)
}

// TimeHead is the head of a column of times shown in loc (nil: Display
// Zone): the column's name in lang and the zone, "创建时间（北京时间）",
// "Created (UTC+8)". Every console table with times names its zone so.
func TimeHead(lang, zh, en string, loc *time.Location) string {
	if lang == "en" {
		return en + " (" + ZoneName(lang, loc) + ")"
	}
	return zh + "（" + ZoneName(lang, loc) + "）"
}

// TimeZoned is Time(t) followed by the zone, for a time that stands in a
// sentence or in a column that is not a time column ("2026-07-14
// 09:30:00 北京时间"); t is a time.Time or a *time.Time ("—" for none).
func TimeZoned(lang string, t any) string {
	var at time.Time
	switch x := t.(type) {
	case time.Time:
		at = x
	case *time.Time:
		if x != nil {
			at = *x
		}
	}
	if at.IsZero() {
		return "—"
	}
	return Time(at) + " " + ZoneName(lang, nil)
}

// Time formats t in DisplayZone ("—" for the zero time).
func Time(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(DisplayZone).Format(TimeLayout)
}
