package web

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/keelwork/keel/keeltype"
)

// Words is a phrase in the console's two languages.
type Words struct {
	ZH, EN string
}

// In picks the phrase for lang ("en" or Chinese).
func (w Words) In(lang string) string { return pick(lang, [2]string{w.ZH, w.EN}, true, "") }

var (
	wordsMu      sync.RWMutex
	actionWords  = map[string]Words{}
	systemActors = map[string]Words{}
	batchKinds   = map[string]Words{}
)

// RegisterActions declares, at init, the words ({Chinese, English}) of the audit actions a
// module writes ("reservation.slot_create": 新建时段 / Create a slot), so
// the console's audit log names them; each module does it in its words
// file, and a test walks every action the source can write and checks it
// has words in both languages. An action registered twice with other
// words panics: one action never reads two ways.
func RegisterActions(m map[string][2]string) {
	register(actionWords, m, "action")
}

// RegisterSystemActors declares the words of a module's system actors
// ("system:payment": 支付系统 / the payment system), the names its own
// background work is audited under.
func RegisterSystemActors(m map[string][2]string) {
	register(systemActors, m, "actor")
}

// RegisterBatchKinds declares the words of the batch kinds a module
// creates ("downstream.requeue": 下游重推任务 / downstream requeue task), so
// the console's batch pages name a batch's kind rather than print its code.
func RegisterBatchKinds(m map[string][2]string) {
	register(batchKinds, m, "batch kind")
}

// BatchKindWord names a batch kind in lang. A kind nobody registered reads
// as its words with the separators spaced, like an unknown action.
func BatchKindWord(lang, kind string) string {
	wordsMu.RLock()
	w, ok := batchKinds[kind]
	wordsMu.RUnlock()
	if ok {
		return w.In(lang)
	}
	if kind == "" {
		return "—"
	}
	return strings.NewReplacer(".", " ", "_", " ").Replace(kind)
}

func register(into map[string]Words, m map[string][2]string, what string) {
	wordsMu.Lock()
	defer wordsMu.Unlock()
	for k, zhEN := range m {
		w := Words{ZH: zhEN[0], EN: zhEN[1]}
		if old, ok := into[k]; ok && old != w {
			panic(fmt.Sprintf("web: %s %q is already registered as %+v", what, k, old))
		}
		into[k] = w
	}
}

// ActionWords returns the registered words of an audit action.
func ActionWords(action string) (Words, bool) {
	wordsMu.RLock()
	defer wordsMu.RUnlock()
	w, ok := actionWords[action]
	return w, ok
}

// Actions lists the registered audit actions (for documentation and tests).
func Actions() []string {
	wordsMu.RLock()
	defer wordsMu.RUnlock()
	out := make([]string, 0, len(actionWords))
	for a := range actionWords {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// ActionWord names an audit action in lang. An action nobody registered
// (which the source walk prevents) reads as its words with the separators
// spaced, never as a code: "slot create (reservation)".
func ActionWord(lang, action string) string {
	if w, ok := ActionWords(action); ok {
		return w.In(lang)
	}
	ns, rest, ok := strings.Cut(action, ".")
	if !ok {
		return strings.ReplaceAll(action, "_", " ")
	}
	rest = strings.NewReplacer(".", " ", "_", " ").Replace(rest)
	return pick(lang, [2]string{"其他操作：" + rest + "（" + ns + "）", rest + " (" + ns + ")"}, true, "")
}

// actorKinds are the prefixes of audited actors: who acted, then a name.
var actorKinds = map[string]Words{
	"token":  {"令牌", "token"},
	"user":   {"用户", "user"},
	"cli":    {"命令行用户", "CLI user"},
	"system": {"系统", "system"},
	"config": {"程序配置", "configuration"},
}

// ActorWord names an audited actor in lang: "token:ops" is 令牌 ops,
// "cli:alice" 命令行用户 alice, "system" 系统 and "system:autopause" the
// words its owner registered (系统（连续失败自动暂停）).
func ActorWord(lang, actor string) string {
	if actor == "" {
		return "—"
	}
	wordsMu.RLock()
	w, ok := systemActors[actor]
	wordsMu.RUnlock()
	if ok {
		return w.In(lang)
	}
	kind, name, found := strings.Cut(actor, ":")
	k, known := actorKinds[kind]
	switch {
	case !known:
		return actor
	case !found && kind == "system":
		return pick(lang, [2]string{"系统", "the system"}, true, "")
	case !found:
		return k.In(lang)
	case kind == "system":
		return pick(lang, [2]string{"系统（" + name + "）", "system (" + name + ")"}, true, "")
	}
	return k.In(lang) + " " + name
}

// errorClassWords are the one translation of the engine's failure classes.
var errorClassWords = map[keeltype.ErrorClass]Words{
	keeltype.ErrorClassRetryable:    {"可重试的失败", "retryable failure"},
	keeltype.ErrorClassPermanent:    {"永久失败", "permanent failure"},
	keeltype.ErrorClassUnknown:      {"结果未知", "outcome unknown"},
	keeltype.ErrorClassTimeout:      {"超时", "timed out"},
	keeltype.ErrorClassPanic:        {"程序崩溃", "crashed (panic)"},
	keeltype.ErrorClassLeaseExpired: {"租约过期", "lease expired"},
	keeltype.ErrorClassCancelled:    {"已取消", "cancelled on request"},
}

// ErrorClassWord names a failure class in lang (the raw value if unknown).
func ErrorClassWord(lang string, c keeltype.ErrorClass) string {
	w, ok := errorClassWords[c]
	return pick(lang, [2]string{w.ZH, w.EN}, ok, string(c))
}

// ErrorClasses lists the classes that have words (for tests).
func ErrorClasses() []keeltype.ErrorClass {
	out := make([]keeltype.ErrorClass, 0, len(errorClassWords))
	for c := range errorClassWords {
		out = append(out, c)
	}
	return out
}

// Duration says a duration in words, to the second: "6 分 29 秒" or
// "6 min 29 s"; "2 天 3 小时" past a day; "—" for none. It is the one
// formatter of durations the console and the modules' pages show.
func Duration(lang string, d time.Duration) string {
	if d <= 0 {
		return "—"
	}
	d = d.Round(time.Second)
	if d < time.Second {
		return pick(lang, [2]string{"不到 1 秒", "under 1 s"}, true, "")
	}
	days := int64(d / (24 * time.Hour))
	h, m, s := int64(d%(24*time.Hour)/time.Hour), int64(d%time.Hour/time.Minute), int64(d%time.Minute/time.Second)
	units := [4][2]string{{"天", "d"}, {"小时", "h"}, {"分", "min"}, {"秒", "s"}}
	n := []int64{days, h, m, s}
	if days > 0 { // past a day the seconds and minutes are noise
		n[2], n[3] = 0, 0
	}
	var parts []string
	for i, v := range n {
		if v == 0 && (len(parts) == 0 || i == 3 || days > 0) {
			continue
		}
		parts = append(parts, fmt.Sprintf("%d %s", v, pick(lang, units[i], true, "")))
	}
	return strings.Join(parts, " ")
}

// waitWords name the engine's wait reasons (keel.WaitConnection, …).
var waitWords = map[string]Words{
	"connection":   {"等待连接", "a connection"},
	"external_ack": {"等待另一通道的回执（ACK）", "another channel's ACK"},
	"ack":          {"等待回执（ACK）", "an ACK"},
}

// WaitReasonWord names why a job waits in lang (the raw reason, which a
// module may choose freely, if it is not one of the engine's).
func WaitReasonWord(lang, reason string) string {
	w, ok := waitWords[reason]
	return pick(lang, [2]string{w.ZH, w.EN}, ok, reason)
}

// targetKinds name the engine's audit targets' kinds ("job:42" is 任务 42).
var targetKinds = map[string]Words{
	"job":               {"任务", "job"},
	"queue":             {"队列", "queue"},
	"flowkey":           {"流控键", "flow key"},
	"flowlimit":         {"限流规则", "flow limit"},
	"batch":             {"批量任务", "batch"},
	"token":             {"令牌", "token"},
	"approval":          {"复核申请", "approval"},
	"discrepancy":       {"对账差异", "discrepancy"},
	"recon.discrepancy": {"对账差异", "discrepancy"},
	"recon.run":         {"对账运行", "reconciliation run"},
}

// TargetWord names an audit target in lang: the engine's kinds in words
// ("job:42" → 任务 42), a module's targets as written (their ids are what
// an operator searches for).
func TargetWord(lang, target string) string {
	kind, id, ok := strings.Cut(target, ":")
	if k, known := targetKinds[kind]; ok && known {
		return k.In(lang) + " " + id
	}
	return target
}
