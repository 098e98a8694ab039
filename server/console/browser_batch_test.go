package console_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/servertest"
)

// TestBatchPageInWords opens a batch's detail in Chromium in both
// languages: its filter and preview counts are named lines an operator
// reads, not JSON or a digest, its kind is named in words, and the raw
// value (with its fingerprint, explained) waits in a closed "raw value"
// detail; the batch list names the kind too.
func TestBatchPageInWords(t *testing.T) {
	t.Parallel()
	e := servertest.SQLite(t)
	id, err := e.CreateBatch(context.Background(), "token:browser", "browser test incident", 4)
	if err != nil {
		t.Fatal(err)
	}
	base := e.Start(t)
	br := browsertest.New(t, 60*time.Second)
	br.Login(base, e.Tokens[auth.RoleOperator])
	words := map[string][]string{
		"zh": {"标签", "命中记录", "将处理", "原始值", "测试条目批次"},
		"en": {"tag", "matching records", "to process", "Raw value", "Test item batch"},
	}
	for _, lang := range []string{"zh", "en"} {
		br.Do(lang+" batch", chromedp.Navigate(base+"/batches/"+strconv.FormatInt(id, 10)+"?lang="+lang),
			chromedp.WaitVisible(chromedp.CSS("#batch-filter")), br.Shot("batch-words-"+lang))
		info := br.Text(lang+" filter and preview", "#batch-info")
		for _, w := range words[lang] {
			if !strings.Contains(info, w) {
				t.Errorf("%s: the batch information lacks %q:\n%s", lang, w, info)
			}
		}
		// What shows (the raw detail closed) has no JSON and no digest.
		shown, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`(() => { const c = document.querySelector("#batch-info").cloneNode(true);
			c.querySelectorAll("details").forEach(d => d.remove()); return c.innerText })()`))
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range []string{"{", "\"", "sha256", "SHA-256", "rule_skipped", "servertest.items"} {
			if strings.Contains(shown, raw) {
				t.Errorf("%s: the batch information shows %q outside its raw detail:\n%s", lang, raw, shown)
			}
		}
		open, err := chromedp.Run(br.Ctx, chromedp.Evaluate[bool](`Array.from(document.querySelectorAll("#batch-info details")).some(d => d.open)`))
		if err != nil {
			t.Fatal(err)
		}
		if open {
			t.Errorf("%s: the raw value is shown open", lang)
		}
		br.Do(lang+" batches", chromedp.Navigate(base+"/batches?lang="+lang), chromedp.WaitVisible(chromedp.CSS("td.bkind")))
		if kind := br.Text(lang+" batch kind in the list", "td.bkind"); kind != words[lang][4] {
			t.Errorf("%s: the batch list shows the kind as %q", lang, kind)
		}
	}
}
