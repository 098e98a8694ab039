package web_test

import (
	"testing"
	"time"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module/web"
)

// TestWordsForEngineData: durations, actors, failure classes and targets
// the engine writes in English read as words in both languages.
func TestWordsForEngineData(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{web.Duration("zh", 6*time.Minute+29*time.Second), "6 分 29 秒"},
		{web.Duration("en", 6*time.Minute+29*time.Second), "6 min 29 s"},
		{web.Duration("zh", 2*time.Hour+5*time.Second), "2 小时 0 分 5 秒"},
		{web.Duration("en", 50*time.Hour+7*time.Minute), "2 d 2 h"},
		{web.Duration("zh", 300*time.Millisecond), "不到 1 秒"},
		{web.Duration("zh", 0), "—"},
		{web.ActorWord("zh", "token:ops"), "令牌 ops"},
		{web.ActorWord("en", "cli:alice"), "CLI user alice"},
		{web.ActorWord("zh", "system"), "系统"},
		{web.ActorWord("zh", "system:autopause"), "系统（连续失败自动暂停）"},
		{web.ActorWord("en", "system:nobody-registered"), "system (nobody-registered)"},
		{web.ErrorClassWord("zh", keeltype.ErrorClassLeaseExpired), "租约过期"},
		{web.ActionWord("zh", "queue.pause"), "暂停队列"},
		{web.ActionWord("en", "new.thing_done"), "thing done (new)"},
		{web.TargetWord("zh", "job:42"), "任务 42"},
		{web.TargetWord("en", "delivery:7"), "delivery:7"},
		{web.TargetWord("zh", "recon.discrepancy:2"), "对账差异 2"},
		{web.WaitReasonWord("zh", "connection"), "等待连接"},
		{web.JobKindWord("zh", "keel.recon.run"), "执行一轮对账"},
		{web.JobKindWord("en", "keel.events.archive"), "Archive handled events"},
		// An application's own kind and queue are its own words.
		{web.JobKindWord("zh", "orders.ship"), "orders.ship"},
		{web.JobKindWord("zh", ""), "—"},
		{web.QueueWord("zh", "default"), "默认队列"},
		{web.ActorWord("zh", "config:host-7"), "程序配置 host-7"},
		{web.ReasonWord("zh", "", "configured in code", nil), "程序配置中设定"},
		{web.QueueWord("en", "mail"), "mail"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	for _, class := range []keeltype.ErrorClass{keeltype.ErrorClassRetryable, keeltype.ErrorClassPermanent, keeltype.ErrorClassUnknown,
		keeltype.ErrorClassTimeout, keeltype.ErrorClassPanic, keeltype.ErrorClassLeaseExpired, keeltype.ErrorClassCancelled} {
		if web.ErrorClassWord("zh", class) == string(class) || web.ErrorClassWord("en", class) == string(class) && class != keeltype.ErrorClassCancelled {
			t.Errorf("failure class %q has no words", class)
		}
	}
}
