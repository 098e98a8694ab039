package delivery

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
)

// TestPreviewBinding (the preview and the creation are bound): creation
// takes its scope and snapshot from the server-signed preview token only;
// a token whose filter was widened, one made for another operator, and an
// expired one are refused, and nothing is created.
func TestPreviewBinding(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	i := e.insertOnly()
	ent := e.enterprise(i, "Acme")
	a := e.app(i, ent, "bind", "b001", ProtoCMPP30, "")
	e.seed(i, a, StatusFailed, time.Now().Add(-time.Minute), "13800000001")
	e.seed(i, a, StatusDelivered, time.Now().Add(-time.Minute), "13800000002")
	pv, err := i.m.PreviewTask(alice(), Filter{Status: StatusFailed})
	if err != nil {
		t.Fatal(err)
	}
	body, sig, _ := strings.Cut(pv.Token, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	widened := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), `"status":"failed"`, `"status":"delivered"`, 1))) + "." + sig
	refuse := func(name string, ctx any, tok, code string) {
		t.Helper()
		c := alice()
		if ctx != nil {
			c = keel.WithActor(c, ctx.(string))
		}
		_, err := i.m.CreateTask(c, CreateTaskRequest{Token: tok, Reason: "binding check"})
		var pe *module.Error
		if !errors.As(err, &pe) || pe.Code != code {
			t.Fatalf("%s: %v, want %s", name, err, code)
		}
	}
	refuse("widened filter", nil, widened, "invalid_preview_token")
	refuse("other operator", "user:mallory", pv.Token, "preview_of_other_operator")
	// An instance whose previews expire at once.
	short := e.insertOnlyWith(func(cfg *keel.Config) { cfg.BatchPreviewTTL = time.Millisecond })
	old, err := short.m.PreviewTask(alice(), Filter{Status: StatusFailed})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := short.m.CreateTask(alice(), CreateTaskRequest{Token: old.Token, Reason: "binding check"}); !isProblem(err, "preview_expired") {
		t.Fatalf("expired preview: %v", err)
	}
	if list, _ := i.m.Tasks(alice(), "zh", "", 0, 10); len(list.Items) != 0 {
		t.Fatalf("a refused token created %d tasks", len(list.Items))
	}
	if _, err := i.m.CreateTask(alice(), CreateTaskRequest{Token: pv.Token, Reason: "four"}); !isProblem(err, "invalid_argument") {
		t.Fatalf("a reason under 5 characters: %v", err)
	}
	b, err := i.m.CreateTask(alice(), CreateTaskRequest{Token: pv.Token, Reason: "binding check"})
	if err != nil || b.Total != 1 {
		t.Fatalf("the genuine token: %v %+v", err, b)
	}
}

func isProblem(err error, code string) bool {
	var pe *module.Error
	return errors.As(err, &pe) && pe.Code == code
}

// TestLabels (operators read words, not internal codes): every record status, task
// state, item outcome, skip reason, wait and failure class has Chinese
// words of its own (never the raw code), and the API's views carry them.
func TestLabels(t *testing.T) {
	keys := []string{}
	for _, s := range AllStatuses {
		keys = append(keys, "status."+string(s))
	}
	for _, s := range TaskStates {
		keys = append(keys, "task."+string(s))
	}
	for _, o := range keeltype.AllBatchOutcomes {
		keys = append(keys, "outcome."+string(o))
	}
	for _, r := range SkipReasons {
		keys = append(keys, "skip."+r)
	}
	for _, c := range []string{ClassAckTimeout, ClassAckRejected, ClassInvalidMsgID, ClassInvalidAck, ClassConnClosed, ClassConnLost,
		ClassHTTPTimeout, ClassHTTPStatus, ClassHTTPConnect, ClassEncode, ClassGateway} {
		keys = append(keys, "class."+c)
	}
	for _, w := range []string{keel.WaitConnection, keel.WaitExternalACK, keel.WaitACK} {
		keys = append(keys, "wait."+w)
	}
	seen := map[string]string{}
	for _, k := range keys {
		zh, en := Label("zh", k), Label("en", k)
		if zh == k || en == k || zh == en {
			t.Errorf("%s has no words of its own (%q / %q)", k, zh, en)
		}
		if prev, dup := seen[zh]; dup && !strings.HasPrefix(k, "outcome.") {
			t.Errorf("%s and %s read the same: %q", k, prev, zh)
		}
		seen[zh] = k
	}
	// The two ways another channel can complete an item read differently
	// (confirmed later by the customer, or delivered by another task).
	if Label("zh", "skip."+SkipConfirmedLater) == Label("zh", "skip."+SkipOtherTask) {
		t.Fatal("confirmed later and handled by another task read the same")
	}
	if Label("zh", "outcome.unprocessed") != "未处理" {
		t.Fatal("unprocessed must be shown as 未处理")
	}
}
