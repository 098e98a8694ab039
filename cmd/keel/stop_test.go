package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDevStopDuringStartup sends SIGINT to the built binary while `keel
// dev` is still starting on a fresh data folder — at its first line, once
// the embedded NATS runs, once the migrations are applied, once the token
// is printed — and checks that each stop is a clean, bounded stop: the
// process exits 0 within the documented 15 s, says it stopped, and neither
// exits with nor logs as an error what the stop's cancellation made fail.
func TestDevStopDuringStartup(t *testing.T) {
	t.Parallel()
	for _, at := range []struct {
		name string
		line *regexp.Regexp
	}{
		{"first line", regexp.MustCompile(`^keel dev: embedded SQLite`)},
		{"nats", natsLine},
		{"migrated", regexp.MustCompile(`applied \d+ migration`)},
		{"token", tokenLine},
	} {
		t.Run(at.name, func(t *testing.T) {
			p := start(t, nil, "dev", "--data", t.TempDir(), "--addr", "127.0.0.1:0",
				"--module-settings", "delivery.cmpp_addr=127.0.0.1:0,alarm.embedded_addr=127.0.0.1:0")
			p.await(t, at.line, 60*time.Second)
			stopAt := time.Now()
			if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- p.cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(25 * time.Second):
				t.Fatalf("keel dev did not exit within 25s of SIGINT at %q; output:\n%s", at.name, p.drain())
			}
			took := time.Since(stopAt)
			out := p.drain()
			if err != nil {
				t.Errorf("SIGINT at %q: exit %v, want a clean stop; output:\n%s", at.name, err, out)
			}
			if took > 16*time.Second {
				t.Errorf("SIGINT at %q: stopped after %s, more than the documented 15 s", at.name, took)
			}
			if !strings.Contains(out, "keel: stopped") {
				t.Errorf("SIGINT at %q: the process did not say it stopped; output:\n%s", at.name, out)
			}
			// The process's own error line, or an error logged: a module's
			// warning that its demo data was cut off is no failure.
			for _, line := range strings.Split(out, "\n") {
				if (strings.HasPrefix(line, "keel: ") || strings.Contains(line, "level=ERROR")) && strings.Contains(line, "context canceled") {
					t.Errorf("SIGINT at %q: the stop's cancellation is reported as a failure: %s\noutput:\n%s", at.name, line, out)
				}
			}
		})
	}
}

// drain returns everything the process printed, waiting up to a second
// for lines still in the pipe.
func (p *proc) drain() string {
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				return p.out.String()
			}
			p.out.WriteString(line + "\n")
		case <-time.After(time.Second):
			return p.out.String()
		}
	}
}

// TestMigrateProgressInALog: `keel migrate up` into a pipe (a deploy log,
// CI) prints one line per migration, not a bar redrawn with carriage
// returns that a log shows as one line of every step.
func TestMigrateProgressInALog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keel.db")
	cmd := exec.Command(binary, "migrate", "up", "--database-url", "sqlite:"+path)
	cmd.Env = append(os.Environ(), "KEEL_SERVER=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("keel migrate up: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "\r") {
		t.Fatalf("the progress in a log is redrawn with carriage returns:\n%q", out)
	}
	steps := regexp.MustCompile(`(?m)^migrating (\d+)/(\d+) \S+$`).FindAllStringSubmatch(string(out), -1)
	if len(steps) < 2 || steps[len(steps)-1][1] != steps[len(steps)-1][2] {
		t.Fatalf("no line per migration ending at the last one:\n%s", out)
	}
	for i, s := range steps {
		if s[1] != strconv.Itoa(i+1) {
			t.Fatalf("step %d printed as %s/%s:\n%s", i+1, s[1], s[2], out)
		}
	}
}
