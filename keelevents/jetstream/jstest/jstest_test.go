package jstest

import (
	"errors"
	"path/filepath"
	"testing"
)

// TestStartRefusesAnotherServersPort: a process whose port another broker
// answers on does not take that broker for its own. Without the check, a
// test that paused or killed its process went on talking to the other
// one, which nobody had stopped.
func TestStartRefusesAnotherServersPort(t *testing.T) {
	t.Parallel()
	first := StartProcess(t)
	dir := t.TempDir()
	second := &Process{t: t, bin: first.bin, Port: first.Port, Dir: filepath.Join(dir, "store"),
		log: filepath.Join(dir, "nats.log"), name: "jstest-second"}
	err := second.start()
	if !errors.Is(err, errPortTaken) {
		t.Fatalf("start on a port another server answers on: %v, want errPortTaken", err)
	}
	if second.cmd != nil {
		t.Fatal("the refused process was left running")
	}
	// The first process is still the one answering, and its own.
	first.Kill()
	first.Start()
}
