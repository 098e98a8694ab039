package export

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/module/moduletest"
)

// holdWriter sends the first after bytes of an answer, flushes them, and
// holds the rest back until ready says the client has shown them.
type holdWriter struct {
	http.ResponseWriter
	after, sent int64
	ready       func() bool
	held        bool
	stalled     *atomic.Bool
}

func (h *holdWriter) Write(p []byte) (int, error) {
	n, err := h.ResponseWriter.Write(p)
	h.sent += int64(n)
	if !h.held && h.sent >= h.after {
		h.held = true
		h.ResponseWriter.(http.Flusher).Flush()
		if !moduletest.WaitUntil(2*time.Minute, h.ready) {
			h.stalled.Store(true)
		}
	}
	return n, err
}

// TestExportCLIDownload: `keel exports download` streams a large export to
// a file and to standard output with a progress bar, and the bytes'
// SHA-256 equals the published digest. The server holds the rest of the
// file back after its first MiB until the CLI's bar has moved: a CLI that
// read the answer whole before writing could not pass. Bad input is
// refused before anything is sent. PostgreSQL exports 200,000 rows (about
// 12 MiB), SQLite 50,000 (about 3 MiB: its one writer makes generating
// rows the slow part of the test).
func TestExportCLIDownload(t *testing.T) {
	each(t, testCLIDownload[pgx.Tx], testCLIDownload[*sql.Tx])
}

func testCLIDownload[TTx any](t *testing.T, e *tenv[TTx]) {
	rows := 200_000
	if e.Name == "sqlite" {
		rows = 50_000
	}
	m := e.build(t, map[string]string{"export.shard_rows": "50000", "export.chunk_rows": "25000", "export.storage": "file"})
	e.start(t, m, 10*time.Second, false)
	seed(t, m, "dl", rows, alice)
	task, err := m.Create(as(alice), Request{Tenant: "dl"})
	if err != nil {
		t.Fatal(err)
	}
	task = waitState(t, m, task.ID, 4*time.Minute, StateSucceeded)
	var stderr moduletest.Output
	var stalled atomic.Bool
	api := moduletest.APIHandler(m.Routes(), alice)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/download") {
			w = &holdWriter{ResponseWriter: w, after: 1 << 20, stalled: &stalled,
				ready: func() bool { return strings.Count(stderr.String(), "\r") >= 2 }}
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	caller := &moduletest.HTTPCaller{Base: srv.URL}
	cli := &moduletest.CLI{API: caller, Verbs: Commands, Err: &stderr}
	run := func(args ...string) (string, error) { return cli.Run(context.Background(), args...) }
	id := strconv.FormatInt(task.ID, 10)
	file := filepath.Join(t.TempDir(), "orders.csv")
	out, err := run("exports", "download", id, "--out", file)
	if err != nil || stalled.Load() {
		t.Fatalf("download: %v (the bar did not move while the server held the rest back: %v)\n%s", err, stalled.Load(), stderr.String())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != task.ObjectSHA256 || int64(len(b)) != task.ObjectBytes || !strings.Contains(out, "(verified)") {
		t.Fatalf("file of %d bytes with sha256 %x; the task names %d bytes, %s; output %q", len(b), sum, task.ObjectBytes, task.ObjectSHA256, out)
	}
	if len(b) < 2<<20 {
		t.Fatalf("the export is only %d bytes: not large", len(b))
	}
	if n := strings.Count(stderr.String(), "\r"); n < 20 {
		t.Fatalf("the progress bar was drawn %d times", n)
	}
	if !strings.Contains(stderr.String(), "[##############################] 100.0%") {
		t.Fatalf("no finished bar in %q", stderr.String()[max(0, len(stderr.String())-300):])
	}
	// To standard output, the bar on standard error.
	stderr = moduletest.Output{}
	out, err = run("exports", "download", id, "-o", "-")
	if err != nil || stalled.Load() {
		t.Fatalf("download to stdout: %v (stalled: %v)", err, stalled.Load())
	}
	sum = sha256.Sum256([]byte(out))
	if hex.EncodeToString(sum[:]) != task.ObjectSHA256 || !strings.Contains(stderr.String(), "(verified)") {
		t.Fatalf("stdout: %d bytes with sha256 %x, want %s", len(out), sum, task.ObjectSHA256)
	}
	// Bad input: a sentence, nothing sent, no file.
	sent := caller.Sent()
	for _, args := range [][]string{{"exports", "download", "abc", "-o", file + ".x"}, {"exports", "download", id}} {
		if _, err := run(args...); err == nil {
			t.Fatalf("%v accepted", args)
		}
	}
	if caller.Sent() != sent {
		t.Fatalf("bad input sent %d requests", caller.Sent()-sent)
	}
	if _, err := os.Stat(file + ".x"); !os.IsNotExist(err) {
		t.Fatalf("a file was written for bad input: %v", err)
	}
	// Not ready: a problem sentence, no file left behind.
	m.SetHeapWatermark(1)
	pending, err := m.Create(as(alice), Request{Tenant: "dl", NewVersion: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run("exports", "download", strconv.FormatInt(pending.ID, 10), "-o", file+".y"); err == nil || !strings.Contains(err.Error(), CodeNotReady) {
		t.Fatalf("download before publish: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".*part*")); len(left) != 0 || fileExists(file+".y") {
		t.Fatalf("left behind: %v", left)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
