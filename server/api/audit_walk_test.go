package api_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/server/api"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

// TestEveryMutationIsAudited walks the router: every mutating route,
// called successfully, leaves exactly one audit entry.
func TestEveryMutationIsAudited(t *testing.T) {
	servertest.Each(t, func(t *testing.T, e *servertest.Env) {
		ctx := keel.WithActor(context.Background(), "test:setup")
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		audits := func() int {
			rows, err := e.Engine.AuditList(ctx, &keel.AuditListParams{Limit: 1000})
			must(err)
			return len(rows)
		}
		var jobID, batchID, tokenID int64
		newJob := func() {
			var err error
			jobID, err = e.Insert(ctx, servertest.Args{N: 1}, nil)
			must(err)
		}
		newBatch := func() {
			var err error
			batchID, err = e.CreateBatch(ctx, "test:setup", "audit walk fixture", 3)
			must(err)
		}
		req := func(path func() string, body string) func() servertest.Request {
			return func() servertest.Request { return servertest.Request{Path: path(), Body: body} }
		}
		fixed := func(s string) func() string { return func() string { return s } }
		job := func(suffix string) func() string {
			return func() string { return api.Prefix + "/jobs/" + strconv.FormatInt(jobID, 10) + suffix }
		}
		batch := func(suffix string) func() string {
			return func() string { return api.Prefix + "/batches/" + strconv.FormatInt(batchID, 10) + suffix }
		}
		reason := `{"reason":"audit walk"}`
		p := api.Prefix
		cases := map[string]servertest.AuditCase{
			"POST " + p + "/jobs/{id}/cancel": {Setup: newJob, Request: req(job("/cancel"), reason)},
			"POST " + p + "/jobs/{id}/retry": {Setup: func() {
				newJob()
				_, err := e.Engine.JobCancel(ctx, jobID, "to retry")
				must(err)
			}, Request: req(job("/retry"), reason)},
			"DELETE " + p + "/jobs/{id}":         {Setup: newJob, Request: req(job(""), reason)},
			"POST " + p + "/queues/{name}/pause": {Request: req(fixed(p+"/queues/default/pause"), reason)},
			"POST " + p + "/queues/{name}/resume": {Setup: func() {
				_, _ = e.Engine.QueuePause(ctx, "default", "to resume") // paused already when walked after pause
			}, Request: req(fixed(p+"/queues/default/resume"), reason)},
			"PUT " + p + "/flow/limits": {Request: req(fixed(p+"/flow/limits"), `{"pattern":"k*","rate":5,"reason":"audit walk"}`)},
			"DELETE " + p + "/flow/limits": {Setup: func() {
				_, err := e.Engine.FlowLimitSet(ctx, &keeltype.FlowLimit{Pattern: "k*", Rate: 5}, "to delete")
				must(err)
			}, Request: req(fixed(p+"/flow/limits"), `{"pattern":"k*","reason":"audit walk"}`)},
			"POST " + p + "/flow/keys/{key}/pause": {Request: req(fixed(p+"/flow/keys/k1/pause"), reason)},
			"POST " + p + "/flow/keys/{key}/resume": {Setup: func() {
				_, err := e.Engine.FlowKeyPause(ctx, "k2", "to resume")
				must(err)
			}, Request: req(fixed(p+"/flow/keys/k2/resume"), reason)},
			"POST " + p + "/flow/keys/{key}/close-breaker": {Request: req(fixed(p+"/flow/keys/k1/close-breaker"), reason)},
			"POST " + p + "/batches/{id}/pause":            {Setup: newBatch, Request: req(batch("/pause"), reason)},
			"POST " + p + "/batches/{id}/resume": {Setup: func() {
				newBatch()
				_, err := e.Engine.BatchPause(ctx, batchID, "to resume")
				must(err)
			}, Request: req(batch("/resume"), reason)},
			"POST " + p + "/batches/{id}/terminate": {Setup: newBatch, Request: req(batch("/terminate"), reason)},
			"POST " + p + "/batches/{id}/keys/{key}/resume": {Setup: func() {
				newBatch()
				_, err := e.Engine.FlowKeyPause(ctx, keel.BatchKeyPrefix(batchID)+"app:1", "to resume")
				must(err)
			}, Request: req(batch("/keys/app:1/resume"), reason)},
			"POST " + p + "/tokens": {Request: req(fixed(p+"/tokens"), `{"name":"made","role":"viewer","reason":"audit walk"}`)},
			"DELETE " + p + "/tokens/{id}": {Setup: func() {
				_, tok, err := e.Store.CreateToken(ctx, "victim", auth.RoleViewer, "test", "to revoke")
				must(err)
				tokenID = tok.ID
			}, Request: req(func() string { return p + "/tokens/" + strconv.FormatInt(tokenID, 10) }, reason)},
			// The probe module writes nothing.
			"POST /admin/probe/things": {Request: req(fixed("/admin/probe/things"), `{"name":"p"}`), ReadOnly: true},
		}
		n := servertest.WalkAudit(t, e.Server.API(), e.Tokens[auth.RoleAdmin], audits, cases)
		t.Logf("walked %d mutating routes", n)
	})
}
