package api_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/server/api"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

// TestBatchControl creates a batch through the engine and reads, pages,
// pauses, resumes and terminates it through the API, checking the audit.
func TestBatchControl(t *testing.T) {
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		ctx := context.Background()
		h := e.Server.API()
		id, err := e.CreateBatch(ctx, "token:setup", "incident 42 resend", 7)
		if err != nil {
			t.Fatal(err)
		}
		base := api.Prefix + "/batches/" + strconv.FormatInt(id, 10)
		viewer, op := e.Tokens[auth.RoleViewer], e.Tokens[auth.RoleOperator]
		decode := func(r response, v any) {
			t.Helper()
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if err := json.Unmarshal(r.body, v); err != nil {
				t.Fatalf("%v: %s", err, r.body)
			}
		}

		var list api.Page[*api.Batch]
		decode(call(t, h, "GET", api.Prefix+"/batches?state=running,queued", viewer, "", ""), &list)
		if len(list.Data) != 1 || list.Data[0].ID != id || list.Data[0].Progress.Total != 7 {
			t.Fatalf("list: %s", mustJSON(list))
		}
		decode(call(t, h, "GET", api.Prefix+"/batches?state=paused", viewer, "", ""), &list)
		if len(list.Data) != 0 {
			t.Fatalf("paused filter: %s", mustJSON(list))
		}

		var b api.Batch
		decode(call(t, h, "GET", base, viewer, "", ""), &b)
		if b.Counts[keeltype.OutcomeQueued] != 7 || b.Progress.Done != 0 || b.Reason != "incident 42 resend" || len(b.Filter) == 0 {
			t.Fatalf("detail: %s", mustJSON(b))
		}

		// Items page to the end, in subject order, with outcome filters.
		seen, cursor := 0, ""
		for pages := 0; ; pages++ {
			if pages > 5 {
				t.Fatal("item paging does not end")
			}
			var items api.Page[*api.BatchItem]
			decode(call(t, h, "GET", base+"/items?limit=3&outcome=queued&cursor="+cursor, viewer, "", ""), &items)
			for _, it := range items.Data {
				if it.Outcome != keeltype.OutcomeQueued || it.Job.BatchID != id {
					t.Fatalf("item %s", mustJSON(it))
				}
				seen++
			}
			if cursor = items.NextCursor; cursor == "" {
				break
			}
		}
		if seen != 7 {
			t.Fatalf("paged %d items, want 7", seen)
		}
		var none api.Page[*api.BatchItem]
		decode(call(t, h, "GET", base+"/items?outcome=success", viewer, "", ""), &none)
		if len(none.Data) != 0 {
			t.Fatalf("success filter: %s", mustJSON(none))
		}

		// Control: role, strict body and reason length are enforced.
		for _, c := range []struct {
			name, token, body string
			status            int
			code              api.Code
		}{
			{"viewer", viewer, `{"reason":"stop it now"}`, 403, api.CodeForbidden},
			{"no body", op, ``, 400, api.CodeInvalidJSON},
			{"short reason", op, `{"reason":"why"}`, 400, api.CodeInvalidArgument},
			{"unknown field", op, `{"reason":"stop it now","force":true}`, 400, api.CodeUnknownField},
		} {
			r := call(t, h, "POST", base+"/pause", c.token, "application/json", c.body)
			if r.status != c.status || problemCode(t, r) != c.code {
				t.Errorf("%s: %d %s", c.name, r.status, r.body)
			}
		}
		if r := call(t, h, "POST", api.Prefix+"/batches/999999/pause", op, "application/json", `{"reason":"missing batch"}`); r.status != 404 {
			t.Errorf("missing batch: %d %s", r.status, r.body)
		}

		decode(call(t, h, "POST", base+"/pause", op, "application/json", `{"reason":"downstream overloaded"}`), &b)
		if b.State != keeltype.BatchPaused || b.Pause == nil || b.Pause.Reason != "manual" || b.Pause.Note != "downstream overloaded" {
			t.Fatalf("after pause: %s", mustJSON(b))
		}
		if r := call(t, h, "POST", base+"/pause", op, "application/json", `{"reason":"pause again"}`); r.status != 409 || problemCode(t, r) != api.CodeInvalidState {
			t.Errorf("double pause: %d %s", r.status, r.body)
		}
		if r := call(t, h, "POST", base+"/keys/app:1/resume", op, "application/json", `{"reason":"key is fine"}`); r.status != 409 && r.status != 404 {
			t.Errorf("resume of an unpaused key: %d %s", r.status, r.body)
		}
		decode(call(t, h, "POST", base+"/resume", op, "application/json", `{"reason":"downstream recovered"}`), &b)
		if b.State != keeltype.BatchRunning && b.State != keeltype.BatchQueued {
			t.Fatalf("after resume: %s", mustJSON(b))
		}
		decode(call(t, h, "POST", base+"/terminate", op, "application/json", `{"reason":"wrong window chosen"}`), &b)
		if b.State != keeltype.BatchTerminated || b.Counts[keeltype.OutcomeUnprocessed] != 7 || b.Progress.Done != 7 {
			t.Fatalf("after terminate: %s", mustJSON(b))
		}
		var items api.Page[*api.BatchItem]
		decode(call(t, h, "GET", base+"/items?outcome=unprocessed&limit=1", viewer, "", ""), &items)
		if len(items.Data) != 1 || items.Data[0].Why != "batch_terminated" || items.NextCursor == "" {
			t.Fatalf("unprocessed items: %s", mustJSON(items))
		}

		audit, err := e.Engine.AuditList(ctx, &keel.AuditListParams{Target: "batch:" + strconv.FormatInt(id, 10), Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"batch.pause": "downstream overloaded", "batch.resume": "downstream recovered",
			"batch.terminate": "wrong window chosen"}
		got := map[string]int{}
		for _, a := range audit {
			got[a.Action]++
			if reason, ok := want[a.Action]; ok && (a.Reason != reason || a.Actor == "" || a.Actor == "token:setup") {
				t.Errorf("audit %s: actor %q reason %q", a.Action, a.Actor, a.Reason)
			}
		}
		for action := range want {
			if got[action] != 1 {
				t.Errorf("audit has %d %s rows, want 1 (%v)", got[action], action, got)
			}
		}
	})
}

func mustJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", " ")
	return string(b)
}

// TestItemWhySkipReason: a skipped item's why is the code the worker gave
// keel.JobSkip, not the raw result document.
func TestItemWhySkipReason(t *testing.T) {
	row := &keeltype.JobRow{Result: []byte(`{"skip_reason":"already_delivered"}`)}
	if got := api.ItemWhy(keeltype.OutcomeSkipped, row); got != "already_delivered" {
		t.Fatalf("why %q, want already_delivered", got)
	}
}
