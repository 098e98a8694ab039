package cli

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
)

// overruns counts stops that passed their bound while the package's tests
// ran.
var overruns atomic.Int32

// TestMain replaces the stop backstop's os.Exit: in a test binary it would
// end every test at once with nothing but "exit status 1", often from the
// cleanup of a test that had already passed. Here an overrun writes every
// goroutine's stack (what the stop waited for) and fails the package at
// its end instead.
func TestMain(m *testing.M) {
	exitProcess = func(code int) {
		overruns.Add(1)
		buf := make([]byte, 8<<20)
		buf = buf[:runtime.Stack(buf, true)]
		fmt.Fprintf(os.Stderr, "a keel stop overran its bound (the process would exit %d); every goroutine:\n%s\n", code, buf)
	}
	code := m.Run()
	if n := overruns.Load(); n > 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d keel stop(s) overran their bound; stacks above\n", n)
		code = 1
	}
	os.Exit(code)
}
