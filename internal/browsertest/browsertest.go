// Package browsertest drives Debian's Chromium through chromedp for the
// console tests of the server and of every module: it finds the browser,
// starts it headless with the flags a closed network needs, collects the
// page's console errors and, when KEEL_TEST_SCREENSHOTS is set, saves
// screenshots into the repository's git-ignored testdata/screenshots/.
package browsertest

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Screenshots reports whether Shot saves its screenshots
// (KEEL_TEST_SCREENSHOTS set to anything but the empty string).
func Screenshots() bool { return os.Getenv("KEEL_TEST_SCREENSHOTS") != "" }

// ScreenshotDir is where screenshots go: testdata/screenshots/ at the
// repository root (git-ignored).
// The root is found from the working directory (a test runs in its
// package's directory), not from this file's compiled path, which is
// module-relative when built with -trimpath (make test does).
func ScreenshotDir() string {
	return filepath.Join(repoRoot(), "testdata", "screenshots")
}

// repoRoot walks up from the working directory to the go.mod of the keel
// module; the working directory itself if there is none.
func repoRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := wd; ; {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/keelwork/keel\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return wd
		}
		dir = parent
	}
}

// Chromium finds the browser: KEEL_TEST_CHROMIUM, else a chromium on PATH.
// Without one the test fails under CI=true and is skipped otherwise.
func Chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KEEL_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium: set KEEL_TEST_CHROMIUM or install Debian's chromium (make test does)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Browser is one headless Chromium tab with its console errors collected.
type Browser struct {
	t *testing.T
	// Ctx is the tab's context with the session's deadline.
	Ctx  context.Context
	step time.Duration
	mu   sync.Mutex
	errs []string
}

// sessionSteps bounds a whole session, in step budgets: a hang in an
// action a test runs on Ctx itself ends there.
const sessionSteps = 5

// stepCtx is Ctx bounded by one step's budget.
func (b *Browser) stepCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.Ctx, b.step)
}

// Options set up a browser as an operator's may be.
type Options struct {
	// Lang is Chromium's own UI language ("en-US", "zh-CN"): what it draws
	// its built-in widgets in and what navigator.language says. Empty:
	// the machine's.
	Lang string
}

// New starts Chromium (1280×900) for t, stopped when t ends. Starting it,
// and then every step (Do, Text, MustSee, Confirm), must each finish within
// timeout; Ctx, for actions a test runs itself, ends after sessionSteps
// times timeout, so a hang fails the test instead of the whole run.
func New(t *testing.T, timeout time.Duration) *Browser {
	t.Helper()
	return NewWith(t, timeout, Options{})
}

// NewWith is New with options.
func NewWith(t *testing.T, timeout time.Duration, o Options) *Browser {
	t.Helper()
	bin := Chromium(t)
	if err := os.MkdirAll(ScreenshotDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	// Without the background-networking flags Chromium keeps dialling
	// Google's hosts, which a closed network refuses.
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900)}
	if o.Lang != "" {
		// The flag sets the UI locale; LANGUAGE is what Chromium on Linux
		// reads it from when the flag is not honoured (headless).
		opts = append(opts, chromedp.Flag("lang", o.Lang), chromedp.Flag("accept-lang", o.Lang),
			chromedp.Env("LANGUAGE="+strings.ReplaceAll(o.Lang, "-", "_")))
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	// chromedp's own errors (a document root it could not read after a
	// navigation, which leaves every later query waiting) go to the test's
	// log, shown when the test fails, instead of the process's stderr.
	var logMu sync.Mutex
	ended := false
	t.Cleanup(func() { logMu.Lock(); ended = true; logMu.Unlock() })
	bctx, cancelB := chromedp.NewContext(actx, chromedp.WithErrorf(func(format string, v ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		if !ended {
			t.Logf("chromedp: "+format, v...)
		}
	}))
	// The first run on a context starts the browser, which then lives as
	// long as that context: it must be the tab's own, without a deadline.
	// A deadline there made timeout the budget of the whole session,
	// Chromium's start included, so on a loaded machine (a cold make test
	// compiling beside three test binaries) a session of ordinary steps ran
	// out in whichever step came last, naming a step that was not slow.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(bctx) }()
	select {
	case err := <-started:
		if err != nil {
			cancelB()
			cancelA()
			t.Fatalf("starting Chromium: %v", err)
		}
	case <-time.After(timeout):
		cancelB()
		cancelA()
		t.Fatalf("starting Chromium: not ready within %s", timeout)
	}
	sctx, cancelT := context.WithTimeout(bctx, sessionSteps*timeout)
	t.Cleanup(func() { cancelT(); cancelB(); cancelA() })
	b := &Browser{t: t, Ctx: sctx, step: timeout}
	messages := chromedp.Console(bctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException || m.Type == "assert" {
				b.mu.Lock()
				b.errs = append(b.errs, m.String())
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// Do runs a named step's actions, failing the test with the step's name.
func (b *Browser) Do(step string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := b.stepCtx()
	defer cancel()
	start := time.Now()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.failed(step)
		b.t.Fatalf("%s: %v", step, err)
	}
	// A slow step is named: the suite's time on a loaded machine is
	// spent in steps like these, and the log is where it shows.
	if d := time.Since(start); d >= slowStep {
		b.t.Logf("step %q took %.1fs", step, d.Seconds())
	}
}

// slowStep is how long a step may take before Do names it in the log.
const slowStep = 2 * time.Second

// failed logs what the tab shows after step failed: its address and the
// start of its text, and a screenshot named for the test and step. A step
// that waited in vain for an element says only "deadline exceeded"; the
// page it was on (an error page, a login form, the previous page) is what
// tells a reader why.
func (b *Browser) failed(step string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 10*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if err != nil {
		b.t.Logf("after %q failed: the page could not be read: %v", step, err)
		return
	}
	if r := []rune(text); len(r) > 1500 {
		text = string(r[:1500]) + "…"
	}
	b.t.Logf("after %q failed the tab shows %s:\n%s", step, loc, text)
	name := "failed-" + strings.NewReplacer("/", "-", " ", "-").Replace(b.t.Name()+"-"+step)
	if buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		_ = os.WriteFile(filepath.Join(ScreenshotDir(), name+".png"), buf, 0o644)
	}
}

// At waits, within a step's budget, until the tab has finished loading a
// page whose address satisfies ok. A click that navigates and a wait for an
// element of the next page in one step can race: the element is looked up
// in the document being replaced. Waiting here first, by evaluations that
// fail while the navigation runs and are tried again, leaves the element's
// wait to a settled document.
func (b *Browser) At(step string, ok func(u *url.URL) bool) {
	b.t.Helper()
	ctx, cancel := b.stepCtx()
	defer cancel()
	for {
		loc, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.readyState === "complete" ? location.href : ""`))
		if err == nil && loc != "" {
			if u, err := url.Parse(loc); err == nil && ok(u) {
				return
			}
		}
		if ctx.Err() != nil {
			b.failed(step)
			b.t.Fatalf("%s: the tab did not arrive (last at %q): %v", step, loc, ctx.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Text is the visible text of the first element matching the CSS selector.
// A node that vanished between being found and being read (the page was
// replaced by a redirect after a form post, or refreshed itself) is looked
// up again in the new document, for up to 10 s: that is the page still
// loading, not a missing element.
func (b *Browser) Text(step, sel string) string {
	b.t.Helper()
	ctx, cancel := b.stepCtx()
	defer cancel()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err == nil {
			return s
		}
		if !strings.Contains(err.Error(), "No node with given id") || time.Now().After(deadline) {
			b.failed(step)
			b.t.Fatalf("%s: %v", step, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// MustSee fails the test unless the element's text holds every want.
func (b *Browser) MustSee(step, sel string, want ...string) {
	b.t.Helper()
	got := b.Text(step, sel)
	for _, w := range want {
		if !strings.Contains(got, w) {
			b.t.Errorf("%s: %s does not show %q:\n%s", step, sel, w, got)
		}
	}
}

// Shot saves a full-page screenshot as name.png. A screenshot is evidence
// for a reader, not an assertion: a page caught between documents (a form
// post's redirect still laying out) has no size yet, so the shot is retried
// for up to 5 s, and a shot that still cannot be taken is logged rather than
// failing the step whose conditions already held.
//
// Shots are taken only when KEEL_TEST_SCREENSHOTS is set (make test leaves
// it unset): nothing asserts on them, and a full-page PNG of each page was
// about 40% of a browser test's time under -race (TestServeWithModules'
// walk of 48 pages: 18 s with shots, 11 s without). A failed step's shot
// (failed) is always taken: it is what tells a reader why.
func (b *Browser) Shot(name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if !Screenshots() {
			return nil
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			buf, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err == nil {
				return os.WriteFile(filepath.Join(ScreenshotDir(), name+".png"), buf, 0o644)
			}
			if ctx.Err() != nil {
				return err
			}
			if time.Now().After(deadline) {
				b.t.Logf("screenshot %s not taken: %v", name, err)
				return nil
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// Login signs in to the console at base with token.
func (b *Browser) Login(base, token string) {
	b.t.Helper()
	b.Do("log in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("header nav")))
}

// Confirm answers the console's confirmation dialog with reason (empty:
// none) and waits for the selector that shows the action took effect.
func (b *Browser) Confirm(step, reason, after string) {
	b.t.Helper()
	actions := []chromedp.Action[chromedp.Void]{chromedp.WaitVisible(chromedp.CSS("#confirm-ok"))}
	if reason != "" {
		actions = append(actions, chromedp.SendKeys(chromedp.CSS("#confirm-reason"), reason))
	}
	actions = append(actions, chromedp.Click(chromedp.CSS("#confirm-ok")), chromedp.WaitVisible(chromedp.CSS(after)))
	b.Do(step, actions...)
}

// CheckConsole fails the test for every error the pages reported.
func (b *Browser) CheckConsole() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		b.t.Errorf("browser reported: %s", e)
	}
}
