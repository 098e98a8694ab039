package reservation

import (
	"errors"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
)

// Operator-facing words: the console shows states, modes and kinds in
// words, never raw values. [0] is Chinese, [1] English.

var stateWords = map[State][2]string{
	StatePendingPayment: {"待支付", "awaiting payment"},
	StatePaid:           {"已支付·待签到", "paid, awaiting check-in"},
	StateCheckedIn:      {"已签到", "checked in"},
	StateReleased:       {"超时未到·已释放", "released (no-show)"},
	StateCancelled:      {"已取消", "cancelled"},
	StateRestored:       {"申诉已恢复", "restored on appeal"},
	StateExpired:        {"未支付·已过期", "expired unpaid"},
}

// stateClass reuses the console's badge colours.
var stateClass = map[State]string{
	StatePendingPayment: "warn", StatePaid: "st-running", StateCheckedIn: "ok", StateReleased: "st-failed",
	StateCancelled: "st-cancelled", StateRestored: "ok", StateExpired: "st-cancelled",
}

var modeWords = map[Mode][2]string{
	ModeOff:    {"关闭（不释放）", "off (nothing released)"},
	ModeDryRun: {"演练（只记录不释放）", "dry run (logged, not released)"},
	ModeOn:     {"开启", "on"},
}

var kindWords = map[string][2]string{
	kindReminder:     {"签到提醒", "check-in reminder"},
	kindRelease:      {"释放通知", "release notice"},
	kindOffer:        {"候补递补通知", "waitlist offer"},
	kindOfferLapsed:  {"递补保留到期", "offer lapsed"},
	kindRestore:      {"恢复通知", "restore notice"},
	kindAvailability: {"余量变更事件", "availability event"},
}

var deliveryWords = map[string][2]string{
	"pending": {"待发送", "pending"},
	"sent":    {"已发送", "sent"},
	"skipped": {"已跳过（预约已变化）", "skipped (reservation moved on)"},
	"failed":  {"发送失败", "failed"},
}

var waitWords = map[string][2]string{
	"waiting": {"排队中", "waiting"},
	"offered": {"已递补", "offered"},
	"left":    {"已离开", "left"},
}

var runWords = map[string][2]string{
	"scan":         {"释放扫描", "release scan"},
	"compensation": {"补偿任务", "compensation"},
}

// problemWords explain the module's problem codes to an operator.
var problemWords = map[string][2]string{
	"slot_full":            {"该时段已满", "the slot is full"},
	"slot_over":            {"该时段已结束", "the slot has ended"},
	"slot_taken":           {"名额已被他人占用，无法恢复", "the place was taken meanwhile; it cannot be restored"},
	"appeal_window_closed": {"已超过申诉时限", "the appeal window has passed"},
	"hold_lapsed":          {"保留已过期，请重新预约", "the hold lapsed; book again"},
	"invalid_state":        {"当前状态不允许此操作", "not allowed in the current state"},
	"version_conflict":     {"数据已被他人修改，请刷新后重试", "changed meanwhile; reload and retry"},
	"booking_restricted":   {"该用户因多次未到店暂被限制预约", "the user is restricted after repeated no-shows"},
	"not_dead_letter":      {"该预约不在死信中", "the reservation is not a dead letter"},
	"not_restricted":       {"该用户当前没有限制", "the user has no restriction"},
	"already_waiting":      {"该用户已在候补队列中", "the user is already waiting"},
	"invalid_argument":     {"输入有误", "invalid input"},
}

func word(m map[string][2]string, key, lang string) string {
	w, ok := m[key]
	if !ok {
		return key
	}
	if lang == "en" {
		return w[1]
	}
	return w[0]
}

// problemText is an error as the operator reads it.
func problemText(v *module.View, err error) string {
	var me *module.Error
	if errors.As(err, &me) {
		if w, ok := problemWords[me.Code]; ok {
			return v.Zh(w[0], w[1]) + "：" + me.Detail
		}
		return me.Detail
	}
	if errors.Is(err, keeltype.ErrNotFound) {
		return v.Zh("未找到", "not found")
	}
	return err.Error()
}
