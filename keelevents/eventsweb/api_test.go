package eventsweb_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/keelwork/keel/keelrecon"
)

type list[T any] struct {
	Data []T `json:"data"`
}

// TestReconAPI drives request → approve (second operator) → execute through
// the admin API, and every refusal: self-approval, execution without
// approval, double execution, unknown ids, bad reasons and bad bodies get
// problem documents with stable codes and write nothing.
func TestReconAPI(t *testing.T) {
	each(t, testReconAPI)
}

func testReconAPI(t *testing.T, s *served) {
	s.seed()
	var run keelrecon.Run
	if st, raw := s.call("alice", "POST", "/api/v1/recon/runs", map[string]any{"reconciler": "ledger"}, &run); st != http.StatusCreated || run.Found != 4 {
		t.Fatalf("run now: %d %s", st, raw)
	}
	var ds list[*keelrecon.DiscrepancyRow]
	s.call("vera", "GET", "/api/v1/recon/discrepancies?class=amount_mismatch", nil, &ds)
	if len(ds.Data) != 1 || ds.Data[0].Impact != 50_000 || !ds.Data[0].NeedsApproval {
		t.Fatalf("amount mismatch: %+v", ds.Data)
	}
	id := ds.Data[0].ID
	path := fmt.Sprintf("/api/v1/recon/discrepancies/%d", id)

	// Bad input first: nothing may be written by any of it.
	bad := []struct {
		name, user, method, path string
		body                     any
		status                   int
		code                     string
	}{
		{"blank reason", "alice", "POST", path + "/request", map[string]string{"reason": "   "}, 400, "invalid_argument"},
		{"NUL in reason", "alice", "POST", path + "/request", map[string]string{"reason": "fix\u0000 it now"}, 400, "invalid_argument"},
		{"over-long reason", "alice", "POST", path + "/request", map[string]string{"reason": strings.Repeat("长", 1001)}, 400, "invalid_argument"},
		{"no body", "alice", "POST", path + "/request", "", 400, "invalid_json"},
		{"unknown field", "alice", "POST", path + "/request", map[string]string{"reason": "a valid reason", "x": "y"}, 400, "unknown_field"},
		{"unknown id", "alice", "POST", "/api/v1/recon/discrepancies/999999/request", map[string]string{"reason": "a valid reason"}, 404, "not_found"},
		{"bad id", "alice", "POST", "/api/v1/recon/discrepancies/abc/request", map[string]string{"reason": "a valid reason"}, 400, "invalid_argument"},
		{"unknown action", "alice", "POST", path + "/delete", map[string]string{"reason": "a valid reason"}, 404, "not_found"},
		{"execute over threshold", "alice", "POST", path + "/execute", map[string]string{"reason": "just do it now"}, 409, "approval_required"},
		{"approve before request", "bob", "POST", path + "/approve", map[string]string{"reason": "nothing to approve"}, 409, "invalid_state"},
		{"viewer acts", "vera", "POST", path + "/request", map[string]string{"reason": "a valid reason"}, 403, "forbidden"},
		{"unknown state filter", "vera", "GET", "/api/v1/recon/discrepancies?state=lost", nil, 400, "invalid_argument"},
		{"unknown parameter", "vera", "GET", "/api/v1/recon/discrepancies?colour=red", nil, 400, "invalid_argument"},
		{"unknown approval", "bob", "POST", "/api/v1/approvals/424242/approve", map[string]string{"reason": "a valid reason"}, 404, "not_found"},
		{"unknown reconciler", "alice", "POST", "/api/v1/recon/runs", map[string]any{"reconciler": "nope"}, 404, "not_found"},
		{"future cutoff", "alice", "POST", "/api/v1/recon/runs", map[string]any{"reconciler": "ledger", "cutoff": "2999-01-01T00:00:00Z"}, 400, "invalid_argument"},
		{"unknown run", "vera", "GET", "/api/v1/recon/runs/999999", nil, 404, "not_found"},
	}
	for _, b := range bad {
		st, raw := s.call(b.user, b.method, b.path, b.body, nil)
		if st != b.status || problemCode(raw) != b.code {
			t.Errorf("%s: %d %s, want %d %s", b.name, st, raw, b.status, b.code)
		}
	}
	if n := s.count("SELECT count(*) FROM keel_approval"); n != 0 {
		t.Fatalf("bad input wrote %d approvals", n)
	}
	if n := s.audits("approval.request") + s.audits("recon.discrepancy.request") + s.audits("recon.discrepancy.execute"); n != 0 {
		t.Fatalf("bad input was audited %d times", n)
	}

	var d keelrecon.DiscrepancyRow
	if st, raw := s.call("alice", "POST", path+"/request", map[string]string{"reason": "渠道对账单显示 600.00"}, &d); st != 200 || d.State != keelrecon.StateAwaitingApproval {
		t.Fatalf("request: %d %s", st, raw)
	}
	if st, raw := s.call("alice", "POST", path+"/approve", map[string]string{"reason": "I approve my own"}, nil); st != 403 || problemCode(raw) != "self_approval" {
		t.Fatalf("self-approval: %d %s", st, raw)
	}
	apPath := fmt.Sprintf("/api/v1/approvals/%d", *d.ApprovalID)
	if st, raw := s.call("alice", "POST", apPath+"/approve", map[string]string{"reason": "I approve my own"}, nil); st != 403 || problemCode(raw) != "self_approval" {
		t.Fatalf("self-approval through approvals: %d %s", st, raw)
	}
	var awaiting list[*keelrecon.Approval]
	s.call("alice", "GET", "/api/v1/approvals?awaiting=me", nil, &awaiting)
	if len(awaiting.Data) != 0 {
		t.Fatalf("alice's own request awaits her: %+v", awaiting.Data)
	}
	s.call("bob", "GET", "/api/v1/approvals?awaiting=me", nil, &awaiting)
	if len(awaiting.Data) != 1 || awaiting.Data[0].RequestedBy != "token:alice" {
		t.Fatalf("bob's queue: %+v", awaiting.Data)
	}
	if st, raw := s.call("bob", "POST", path+"/approve", map[string]string{"reason": "与渠道对账单一致"}, &d); st != 200 || d.State != keelrecon.StateApproved {
		t.Fatalf("approve: %d %s", st, raw)
	}
	if st, raw := s.call("alice", "POST", path+"/execute", map[string]string{"reason": "执行已批准的调整"}, &d); st != 200 || d.State != keelrecon.StateExecuted {
		t.Fatalf("execute: %d %s", st, raw)
	}
	if st, raw := s.call("bob", "POST", path+"/execute", map[string]string{"reason": "double click"}, nil); st != 409 || problemCode(raw) != "already_executed" {
		t.Fatalf("second execute: %d %s", st, raw)
	}
	if st, raw := s.call("bob", "POST", apPath+"/execute", map[string]string{"reason": "retry via approvals"}, nil); st != 409 || problemCode(raw) != "already_executed" {
		t.Fatalf("second execute through approvals: %d %s", st, raw)
	}
	if n := s.fixes(d.ActionID); n != 1 {
		t.Fatalf("action %s applied %d times", d.ActionID, n)
	}
	// The next run verifies the fix.
	s.call("alice", "POST", "/api/v1/recon/runs", map[string]any{"reconciler": "ledger"}, &run)
	s.call("vera", "GET", path, nil, &d)
	if d.State != keelrecon.StateVerified || d.VerifiedRunID == nil || *d.VerifiedRunID != run.ID {
		t.Fatalf("after the next run: %s", d.State)
	}
	var runs list[*keelrecon.Run]
	s.call("vera", "GET", "/api/v1/recon/runs?reconciler=ledger&limit=1", nil, &runs)
	if len(runs.Data) != 1 || runs.Data[0].ID != run.ID {
		t.Fatalf("runs: %+v", runs.Data)
	}
}
