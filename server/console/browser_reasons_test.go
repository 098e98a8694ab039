package console_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

// TestEngineReasonsInWords opens, in Chromium and in both languages, the
// audit log and a batch after the engine wrote reasons of its own: a
// batch whose counters were repaired from its items (stored with its
// reason code), an auto-pause audited before codes were stored (read by
// its text), a batch's last error from an auto-paused key and a job's
// error history (an expired lease, a timeout). Each reads in the page's
// language, and the stored English only in the hover title.
func TestEngineReasonsInWords(t *testing.T) {
	t.Parallel()
	e := servertest.SQLite(t)
	ctx := keel.WithActor(context.Background(), "token:browser")
	id, err := e.CreateBatch(ctx, "token:browser", "reason words batch", 3)
	if err != nil {
		t.Fatal(err)
	}
	// Counters that no longer match the items, which only a bug (or a
	// hand in the database) produces; the repair audits batch.reconcile.
	if _, err := e.DB.ExecContext(ctx, `INSERT INTO keel_batch_count (batch_id, bucket, n) VALUES (?, 'skipped', 7)
		ON CONFLICT (batch_id, bucket) DO UPDATE SET n = n + 7`, id); err != nil {
		t.Fatal(err)
	}
	if err := e.ReconcileBatch(ctx, id); err != nil {
		t.Fatal(err)
	}
	old := keel.WithActor(ctx, "system:autopause")
	if err := e.Engine.AuditRecord(old, keel.Audit{Action: "flowkey.autopause", Target: "flowkey:app:2",
		Reason: "4 consecutive failures reached the threshold of 4"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DB.ExecContext(ctx, `UPDATE keel_batch SET last_error = ? WHERE id = ?`,
		"key app:1 auto-paused: counterpart busy", id); err != nil {
		t.Fatal(err)
	}
	// The history the engine writes for a job: the rescuer's expired
	// lease, then an attempt past its time limit.
	jobID, err := e.Insert(ctx, servertest.Args{N: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.DB.ExecContext(ctx, `UPDATE keel_job SET state = 'failed', errors = ? WHERE id = ?`,
		`[{"attempt":1,"fence":1,"class":"lease_expired","message":"lease expired (owner host-7)","at":"2026-12-01T04:00:00Z"},`+
			`{"attempt":2,"fence":2,"class":"timeout","message":"context deadline exceeded","at":"2026-12-01T04:05:00Z"}]`, jobID); err != nil {
		t.Fatal(err)
	}
	base := e.Start(t)
	br := browsertest.New(t, 90*time.Second)
	br.Login(base, e.Tokens[auth.RoleOperator])
	batch := "/batches/" + strconv.FormatInt(id, 10)
	job := "/jobs/" + strconv.FormatInt(jobID, 10)
	raw := []string{"counters drifted from items", "consecutive failures reached", "auto-paused:", "lease expired (owner", "deadline exceeded"}
	want := map[string]map[string][]string{
		"zh": {"/audit": {"计数与任务项不符，已按任务项更正", "连续失败 4 次，达到自动暂停阈值 4"},
			batch: {"键 app:1 连续失败已自动暂停，最后一次错误：counterpart busy"},
			job:   {"执行者 host-7 的租约已过期，任务已收回", "超时：执行超过了时限", "测试空任务", "默认队列", "序号"}},
		"en": {"/audit": {"The counters disagreed with the items and were corrected from them",
			"4 failures in a row reached the auto-pause threshold of 4"},
			batch: {"Key app:1 paused itself after repeated failures; last error: counterpart busy"},
			job: {"The lease of host-7 expired and the job was taken back", "Timed out: the attempt ran past its time limit",
				"Test no-op job", "Default queue", "Number"}},
	}
	titleOf := map[string]string{"/audit": "counters drifted from items", batch: "auto-paused", job: "lease expired (owner host-7)"}
	for _, lang := range []string{"zh", "en"} {
		br.Do("language "+lang, chromedp.Navigate(base+"/?lang="+lang), chromedp.WaitVisible(chromedp.CSS("header nav")))
		for _, p := range []string{"/audit", batch, job} {
			br.Do(lang+" "+p, chromedp.Navigate(base+p), chromedp.WaitVisible(chromedp.CSS("main")),
				br.Shot("reasons-"+lang+strings.ReplaceAll(p, "/", "-")))
			text := br.Text(p, "main")
			for _, w := range want[lang][p] {
				if !strings.Contains(text, w) {
					t.Errorf("%s %s does not say %q:\n%s", lang, p, w, text)
				}
			}
			for _, r := range raw {
				if strings.Contains(text, r) {
					t.Errorf("%s %s shows the stored %q:\n%s", lang, p, r, text)
				}
			}
			titles, err := chromedp.Run(br.Ctx, chromedp.Evaluate[[]string](
				`[...document.querySelectorAll("main .reason[title]")].map(e => e.title)`))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(titles, "\n"), titleOf[p]) {
				t.Errorf("%s %s: the stored reason is not in a hover title: %q", lang, p, titles)
			}
		}
		// The job's arguments are fields in their kind's words, the
		// stored JSON folded under them.
		args, err := chromedp.Run(br.Ctx, chromedp.Evaluate[[]string](
			`[...document.querySelectorAll("#job-args tr[data-field]")].map(e => e.dataset.field + "=" + e.innerText.replace(/\s+/g, " ").trim())`))
		if err != nil {
			t.Fatal(err)
		}
		if len(args) != 1 || args[0] != "n="+want[lang][job][4]+" 1" {
			t.Errorf("%s %s: the arguments read %q", lang, job, args)
		}
		// The job list names the kind and the queue in words too, with
		// the identifiers (what the filter takes) in the hover title.
		br.Do(lang+" jobs", chromedp.Navigate(base+"/jobs"), chromedp.WaitVisible(chromedp.CSS("td.jkind")))
		for cell, w := range map[string][2]string{"td.jkind": {"test.noop", want[lang][job][2]}, "td.qname": {"default", want[lang][job][3]}} {
			got, err := chromedp.Run(br.Ctx, chromedp.Evaluate[[]string](
				`[...document.querySelectorAll("main `+cell+`")].map(e => e.title + "=" + e.textContent)`))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 || got[0] != w[0]+"="+w[1] {
				t.Errorf("%s /jobs %s: %q, want %q", lang, cell, got, w[0]+"="+w[1])
			}
		}
	}
	br.CheckConsole()
}
