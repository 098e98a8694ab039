package console_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

// TestAuditReasonsInWords: the audit log says in words what reconciliation
// wrote as its reasons — from the reason code and run number it stores, and
// for an older row from its English text alone — Chinese first, English on
// request; an operator's own reason is shown as written.
func TestAuditReasonsInWords(t *testing.T) {
	t.Parallel()
	e := servertest.SQLite(t)
	base := e.Start(t)
	ctx := keel.WithActor(t.Context(), "system:recon")
	for _, a := range []keel.Audit{
		{Action: "recon.discrepancy.verify", Target: "recon.discrepancy:1", Reason: "not found by run 7",
			Context: map[string]any{"reason_code": "recon.not_found", "reason_arg": 7}},
		{Action: "recon.discrepancy.open", Target: "recon.discrepancy:2", Reason: "found by run 3"},
		{Action: "recon.discrepancy.execute", Target: "recon.discrepancy:2", Reason: "核实渠道账单, 同意退款"},
	} {
		if err := e.Engine.AuditRecord(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm(base+"/login", url.Values{"token": {e.Tokens[auth.RoleViewer]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	page := func(lang string) string {
		t.Helper()
		resp, err := c.Get(base + "/audit?lang=" + lang)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/audit?lang=%s: %d %s", lang, resp.StatusCode, b)
		}
		return string(b)
	}
	zh := page("zh")
	for _, want := range []string{"第 7 次对账运行未再发现", "第 3 次对账运行发现", "核实渠道账单, 同意退款"} {
		if !strings.Contains(zh, want) {
			t.Errorf("Chinese audit log lacks %q", want)
		}
	}
	if strings.Contains(zh, ">not found by run 7<") || strings.Contains(zh, ">found by run 3<") {
		t.Error("the Chinese audit log shows a raw reason")
	}
	en := page("en")
	for _, want := range []string{">not found by run 7<", ">found by run 3<"} {
		if !strings.Contains(en, want) {
			t.Errorf("English audit log lacks %q", want)
		}
	}
}
