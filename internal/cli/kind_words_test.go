package cli

import (
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/modules/alarm"
	"github.com/keelwork/keel/modules/delivery"
	"github.com/keelwork/keel/modules/export"
	"github.com/keelwork/keel/modules/inventory"
	"github.com/keelwork/keel/modules/payment"
	"github.com/keelwork/keel/modules/reservation"
	"github.com/keelwork/keel/modules/tracking/ingest"
)

// TestEveryJobKindAndQueueHasWords configures the server as `keel dev`
// does — the demo, the events backbone, reconciliation and every installed
// module — and checks that each job kind it works and each queue it
// declares has words in Chinese and in English, so the console's job,
// queue and flow-limit pages say what a job is for rather than print its
// identifier; and so has each reconciler, event topic and consumer, which
// the reconciliation and events pages list. An application's own kinds read as their identifiers; the
// server's never do.
func TestEveryJobKindAndQueueHasWords(t *testing.T) {
	t.Parallel()
	e := moduletest.SQLite(t, allLines)
	host := e.Host(nil)
	host.Demo = true
	host.Services = module.NewServices()
	host.Events = e.Events(t, nil)
	rc, err := attachRecon(host, moduletest.Quiet())
	if err != nil {
		t.Fatal(err)
	}
	mods, err := buildModules(moduleNames(), host)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &keel.Config{}
	addDemo(cfg, nil)
	if err := host.Events.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		if err := m.Configure(cfg); err != nil {
			t.Fatalf("configuring %s: %v", m.Name(), err)
		}
	}
	if err := rc.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	kinds := cfg.Workers.Kinds()
	queues := make([]string, 0, len(cfg.Queues))
	for q := range cfg.Queues {
		queues = append(queues, q)
	}
	slices.Sort(kinds)
	slices.Sort(queues)
	// Every module that works jobs is in the list: the walk sees the
	// configuration, not a part of it.
	for _, want := range []string{"demo.deliver", "keel.events.archive", "keel.recon.run", "delivery.push",
		"reservation.release", "export.shard", "alarm.notice", "payment.refund.query", "tracking.realtime"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("the configured kinds %v miss %s", kinds, want)
		}
	}
	if len(queues) < 8 {
		t.Errorf("only %d queues configured: %v", len(queues), queues)
	}
	haveWords(t, "job kind", web.JobKindWords, kinds...)
	haveWords(t, "queue", web.QueueWords, queues...)
	// The reconcilers the modules registered, as the recon pages list them.
	recons := rc.Reconcilers()
	if len(recons) < 10 {
		t.Errorf("only %d reconcilers registered: %v", len(recons), recons)
	}
	for _, r := range recons {
		namesHaveWords(t, "reconciler", r.Name)
	}
	// The topics the modules emit and the consumers they run, as the
	// events pages list them.
	namesHaveWords(t, "topic", export.TopicCompleted, inventory.Topic, payment.TopicPaid, payment.TopicLate,
		payment.TopicRefundStarted, payment.TopicRefundDone, payment.TopicRefundFailed, payment.TopicFee, payment.TopicFeeReturn,
		reservation.AvailabilityTopic, reservation.NotificationTopic, ingest.TopicChanged, ingest.TopicDetail)
	namesHaveWords(t, "consumer", "export-notice", inventory.ConsumerFulfilment, inventory.ConsumerSearch, inventory.ConsumerStats,
		payment.ConsumerLedger, payment.ConsumerOrders, reservation.AvailabilityConsumer, reservation.NotifierConsumer)
}

func namesHaveWords(t *testing.T, what string, names ...string) {
	t.Helper()
	haveWords(t, what, func(n string) (web.Words, bool) { return web.NameWords(what, n) }, names...)
}

func haveWords(t *testing.T, what string, lookup func(string) (web.Words, bool), names ...string) {
	t.Helper()
	for _, n := range names {
		w, ok := lookup(n)
		if !ok {
			t.Errorf("%s %q has no words (register them in its module's words file)", what, n)
			continue
		}
		checkWords(t, what+" "+n, w)
	}
}

func checkWords(t *testing.T, what string, w web.Words) {
	t.Helper()
	if !strings.ContainsFunc(w.ZH, func(r rune) bool { return unicode.Is(unicode.Han, r) }) {
		t.Errorf("%s: %q is not Chinese", what, w.ZH)
	}
	if w.EN == "" || strings.ContainsAny(w.EN, "_.") {
		t.Errorf("%s: %q is not English words", what, w.EN)
	}
}

// TestEveryJobFieldHasWords: the console's job page lays a job's
// arguments and result out as fields in the words of the kind's module
// (the kind's first segment); every field of every argument type the
// server works, and of the results its workers record, has them.
func TestEveryJobFieldHasWords(t *testing.T) {
	t.Parallel()
	for _, args := range []keel.JobArgs{
		delivery.PushArgs{}, delivery.RequeueArgs{}, delivery.ForwardArgs{}, delivery.IngestArgs{},
		reservation.ScanArgs{}, reservation.CompensateArgs{}, reservation.ReleaseArgs{}, reservation.NotifyArgs{}, reservation.RelayArgs{},
		export.ShardArgs{}, export.MergeArgs{}, export.CleanArgs{},
		alarm.NoticeArgs{},
		payment.RefundCallArgs{}, payment.RefundQueryArgs{},
		ingest.BackfillArgs{}, ingest.RealtimeArgs{}, ingest.VerifyArgs{},
		keelrecon.RunArgs{}, keelevents.ArchiveArgs{},
		demoArgs{}, notifyArgs{},
	} {
		scope, _, _ := strings.Cut(args.Kind(), ".")
		moduletest.FieldsHaveWords(t, scope, moduletest.JSONFields(args)...)
	}
	// What the workers record as results (keel.RecordResult): delivery's
	// pushed record, reservation's release outcome, the demo's.
	for scope, fields := range map[string][]string{
		"delivery":    {"record_status", "conn", "deliver_msg_id"},
		"reservation": {"outcome", "state", "version", "error"},
		"export":      {"rows", "sha256", "key"},
		"demo":        {"confirmation", "ack", "seq"},
	} {
		moduletest.FieldsHaveWords(t, scope, fields...)
	}
	for _, c := range []struct{ scope, field, value string }{
		{"delivery", "record_status", "delivered"},
		{"delivery", "kind", "report"},
		{"reservation", "outcome", "stale"},
		{"reservation", "state", "paid"},
	} {
		if w := web.FieldValueWord("zh", c.scope, c.field, c.value); w == c.value {
			t.Errorf("%s %s=%s has no words", c.scope, c.field, c.value)
		}
	}
}
