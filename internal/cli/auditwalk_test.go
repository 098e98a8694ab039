package cli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel/server/servertest"
)

// TestEveryModuleMutationIsAudited walks the delivery module's routes of
// `keel serve` (with its demo data): every mutating route, called
// successfully, leaves exactly one audit entry by the caller.
func TestEveryModuleMutationIsAudited(t *testing.T) {
	t.Parallel()
	srv, token, db := startServeWith(t, map[string]string{"demo": "true"})
	h := srv.API()
	audits := func() int {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM keel_audit WHERE actor = 'token:walker'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Demo records: the walk requeues delivered ones (each at most once).
	var records []map[string]any
	deadline := time.Now().Add(60 * time.Second)
	for len(records) < 6 {
		status, out := apiCall(t, h, token, "GET", "/admin/operations/downstream-deliveries?status=delivered&size=50", nil)
		if status != 200 {
			t.Fatalf("records: %d %v", status, out)
		}
		records = records[:0]
		for _, it := range out["items"].([]any) {
			records = append(records, it.(map[string]any))
		}
		if time.Now().After(deadline) {
			_, all := apiCall(t, h, token, "GET", "/admin/operations/downstream-deliveries?size=50", nil)
			t.Fatalf("the demo made %d failed records in 60s: %.2000v", len(records), all)
		}
		if len(records) < 6 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	recID := func(i int) string { return fmt.Sprint(int64(records[i]["id"].(float64))) }
	ent := idOf(t)(apiCall(t, h, token, "POST", "/admin/operations/delivery-enterprises", map[string]any{"name": "Walk Co"}))
	app := idOf(t)(apiCall(t, h, token, "POST", "/admin/operations/delivery-applications", map[string]any{
		"enterprise_id": json.Number(ent), "name": "walk", "account": "w1", "secret": "s3cret", "protocol": "cmpp30", "rate": 5}))
	var task string
	next := 3 // records[3:] are for tasks, one each
	preview := func() string {
		rec := records[next]
		next++
		status, pv := apiCall(t, h, token, "POST", "/admin/operations/downstream-requeue-tasks/preview",
			map[string]any{"status": "delivered", "keyword": rec["msg_id"]})
		if status != 200 || pv["eligible"] != float64(1) {
			t.Fatalf("preview: %d %v", status, pv)
		}
		return pv["token"].(string)
	}
	newTask := func() {
		task = idOf(t)(apiCall(t, h, token, "POST", "/admin/operations/downstream-requeue-tasks",
			map[string]any{"token": preview(), "reason": "walk fixture task", "rate": 1}))
	}
	control := func(action string) func() servertest.Request {
		return func() servertest.Request {
			return servertest.Request{Path: "/admin/operations/downstream-requeue-tasks/" + task + "/" + action,
				Body: `{"reason":"audit walk"}`}
		}
	}
	fixed := func(path, body string) func() servertest.Request {
		return func() servertest.Request { return servertest.Request{Path: path, Body: body} }
	}
	tp := "/admin/operations/downstream-requeue-tasks"
	cases := map[string]servertest.AuditCase{
		"POST /admin/operations/delivery-enterprises": {Request: fixed("/admin/operations/delivery-enterprises", `{"name":"Audited Co"}`)},
		"POST /admin/operations/delivery-applications": {Request: fixed("/admin/operations/delivery-applications",
			`{"enterprise_id":`+ent+`,"name":"walk2","account":"w2","secret":"s","protocol":"cmpp30","rate":5}`)},
		"PATCH /admin/operations/delivery-applications/{id}": {Request: fixed("/admin/operations/delivery-applications/"+app, `{"rate":7}`)},
		"POST " + tp + "/preview":                            {Request: fixed(tp+"/preview", `{"status":"delivered"}`), ReadOnly: true},
		"POST " + tp: {Request: func() servertest.Request {
			return servertest.Request{Path: tp, Body: `{"token":"` + preview() + `","reason":"audit walk task","rate":1}`}
		}},
		"POST " + tp + "/{id}/pause":     {Setup: newTask, Request: control("pause")},
		"POST " + tp + "/{id}/resume":    {Request: control("resume")},
		"POST " + tp + "/{id}/terminate": {Setup: newTask, Request: control("terminate")},
		"POST /admin/operations/downstream-deliveries/{id}/requeue": {Request: func() servertest.Request {
			return servertest.Request{Path: "/admin/operations/downstream-deliveries/" + recID(0) + "/requeue", Body: `{"reason":"audit walk"}`}
		}},
		// A page requeue audits each record it requeued.
		"POST /admin/operations/downstream-deliveries/requeue": {Want: 2, Request: func() servertest.Request {
			return servertest.Request{Path: "/admin/operations/downstream-deliveries/requeue",
				Body: `{"ids":[` + recID(1) + `,` + recID(2) + `],"reason":"audit walk"}`}
		}},
	}
	n := servertest.WalkAudit(t, h, token, audits, cases, func(method, pattern string) bool {
		return strings.HasPrefix(pattern, "/admin/operations/")
	})
	t.Logf("walked %d mutating routes", n)
}
