package web

import "sort"

// Job kinds and queue names are identifiers a program chose
// ("payment.refund.query", "alarm_severe"); the console's job pages show
// what they are for in words, with the identifier beside it for a search
// or a filter. A module registers the words of the kinds it works and the
// queues it declares at init, in its words file; a test in the server
// checks every kind and queue the full server configures has them.

var (
	jobKinds   = map[string]Words{}
	queueNames = map[string]Words{}
)

// RegisterJobKinds declares the words ({Chinese, English}) of the job
// kinds a module works ("payment.refund.query": 查询退款结果 / Query a
// refund's result).
func RegisterJobKinds(m map[string][2]string) {
	register(jobKinds, m, "job kind")
}

// RegisterQueues declares the words of the queues a module declares
// ("alarm_severe": 严重告警通知队列 / Severe alarm notices).
func RegisterQueues(m map[string][2]string) {
	register(queueNames, m, "queue")
}

// JobKindWords returns the registered words of a job kind.
func JobKindWords(kind string) (Words, bool) { return lookup(jobKinds, kind) }

// QueueWords returns the registered words of a queue.
func QueueWords(queue string) (Words, bool) { return lookup(queueNames, queue) }

// JobKindWord names a job kind in lang. A kind nobody registered (an
// application's own) reads as the identifier its program gave it: unlike
// an audit action, it is the user's own word.
func JobKindWord(lang, kind string) string { return nameWord(jobKinds, lang, kind) }

// QueueWord names a queue in lang; an unregistered queue reads as its name.
func QueueWord(lang, queue string) string { return nameWord(queueNames, lang, queue) }

func lookup(m map[string]Words, name string) (Words, bool) {
	wordsMu.RLock()
	defer wordsMu.RUnlock()
	w, ok := m[name]
	return w, ok
}

// The engine's own kinds and its default queue.
func init() {
	RegisterJobKinds(map[string][2]string{
		"keel.events.archive": {"归档已处理的事件", "Archive handled events"},
		"keel.recon.run":      {"执行一轮对账", "Run a reconciliation"},
	})
	RegisterQueues(map[string][2]string{
		"default": {"默认队列", "Default queue"},
	})
	// A reconciliation job's arguments (keelrecon.RunArgs).
	RegisterFields("keel", map[string][2]string{
		"reconciler": {"对账项", "Reconciler"},
		"cutoff":     {"对账截止时间", "Cutoff"},
	})
}

// The names of the events backbone and of reconciliation are identifiers
// too ("payment.refund.succeeded", "inventory-search", "payment.channel");
// their pages say them in words the same way.
var (
	topicNames      = map[string]Words{}
	consumerNames   = map[string]Words{}
	reconcilerNames = map[string]Words{}
)

// RegisterTopics declares the words of the event topics a module emits
// ("payment.succeeded": 支付成功 / Payment succeeded).
func RegisterTopics(m map[string][2]string) { register(topicNames, m, "topic") }

// RegisterConsumers declares the words of a module's event consumers
// ("payment-ledger": 记账 / Ledger).
func RegisterConsumers(m map[string][2]string) { register(consumerNames, m, "consumer") }

// RegisterReconcilers declares the words of a module's reconcilers
// ("payment.channel": 渠道账单四方对账 / Channel bill, four ways).
func RegisterReconcilers(m map[string][2]string) { register(reconcilerNames, m, "reconciler") }

// TopicWord, ConsumerWord and ReconcilerWord name one in lang; an
// unregistered name (an application's own) reads as itself.
func TopicWord(lang, topic string) string { return nameWord(topicNames, lang, topic) }

// ConsumerWord: see TopicWord.
func ConsumerWord(lang, name string) string { return nameWord(consumerNames, lang, name) }

// ReconcilerWord: see TopicWord.
func ReconcilerWord(lang, name string) string { return nameWord(reconcilerNames, lang, name) }

// NameWords returns the registered words of a topic, a consumer or a
// reconciler (what is "topic", "consumer" or "reconciler"), for tests.
func NameWords(what, name string) (Words, bool) {
	m := map[string]map[string]Words{"topic": topicNames, "consumer": consumerNames, "reconciler": reconcilerNames}[what]
	return lookup(m, name)
}

func nameWord(m map[string]Words, lang, name string) string {
	if w, ok := lookup(m, name); ok {
		return w.In(lang)
	}
	if name == "" {
		return "—"
	}
	return name
}

// JobKinds lists the registered job kinds, sorted (for a filter's
// suggestions).
func JobKinds() []string { return sortedKeys(jobKinds) }

// Queues lists the registered queues, sorted.
func Queues() []string { return sortedKeys(queueNames) }

func sortedKeys(m map[string]Words) []string {
	wordsMu.RLock()
	defer wordsMu.RUnlock()
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
