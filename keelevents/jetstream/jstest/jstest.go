// Package jstest gives tests a NATS server with JetStream: an embedded one
// per test, the machine's (KEEL_TEST_NATS_URL), or a nats-server process of
// their own that they can kill and restart.
package jstest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/keelwork/keel/keelevents/jetstream/embedded"
)

// EnvURL names the variable holding the test NATS server's URL.
const EnvURL = "KEEL_TEST_NATS_URL"

// DefaultURL is used when EnvURL is unset.
const DefaultURL = "nats://127.0.0.1:4222"

// Embedded starts an embedded server with its store in a temporary
// directory, shut down when the test ends, and returns its URL.
func Embedded(t testing.TB) string {
	t.Helper()
	s, err := embedded.Start(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("jstest: starting an embedded NATS server: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s.URL()
}

// ServerURL returns the machine's JetStream server (EnvURL, default
// DefaultURL), failing the test if it does not answer (skipping under
// -short). scripts/test.sh starts it.
func ServerURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		u = DefaultURL
	}
	nc, err := nats.Connect(u, nats.Timeout(3*time.Second))
	if err == nil {
		defer nc.Close()
		var ok bool
		_, err = nc.Request("$JS.API.INFO", nil, 3*time.Second)
		ok = err == nil
		if !ok {
			err = fmt.Errorf("no JetStream: %w", err)
		}
	}
	if err != nil {
		if testing.Short() {
			t.Skipf("jstest: NATS unreachable at %s (skipped under -short): %v", u, err)
		}
		t.Fatalf("jstest: NATS with JetStream is required but unreachable at %s: %v\n"+
			"run the tests through scripts/test.sh (it starts nats-server), or set %s", u, err, EnvURL)
	}
	return u
}

// Binary is the nats-server program Process runs (Debian's package).
var Binary = "/usr/sbin/nats-server"

// Process is a nats-server process of the test's own: own port, own store
// directory, JetStream on. Kill and Start let a test take the broker away
// and bring it back on the same port and store.
type Process struct {
	t    testing.TB
	Port int
	Dir  string
	bin  string // the nats-server program found for this process
	cmd  *exec.Cmd
	log  string
	// name is this process's server name, unique per Process. Readiness
	// checks it: a port found free can be taken by another test's broker
	// before this one binds it (or while this one is down for a restart),
	// and that broker answers the same INFO request. A test then paused
	// or killed its own idle process while its client talked to a broker
	// nobody stopped, and a publish "to a stalled broker" was acknowledged.
	name string
}

// errPortTaken says another server answered on the process's port.
var errPortTaken = errors.New("another server answers on the port")

// StartProcess starts nats-server on a free port with a store under a
// temporary directory; it is killed when the test ends.
func StartProcess(t testing.TB) *Process {
	t.Helper()
	bin := Binary
	if _, err := os.Stat(bin); err != nil {
		if p, lerr := exec.LookPath("nats-server"); lerr == nil {
			bin = p
		} else {
			t.Fatalf("jstest: %s not found (apt-get install nats-server; scripts/test.sh installs it)", Binary)
		}
	}
	dir := t.TempDir()
	p := &Process{t: t, bin: bin, Dir: filepath.Join(dir, "store"), log: filepath.Join(dir, "nats.log"),
		name: fmt.Sprintf("jstest-%d-%x", os.Getpid(), rand.Uint64())}
	t.Cleanup(func() {
		if p.cmd != nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	for attempt := 0; ; attempt++ {
		p.Port = freePort(t)
		err := p.start()
		if err == nil {
			return p
		}
		if !errors.Is(err, errPortTaken) || attempt == 4 {
			t.Fatal(err)
		}
	}
}

// URL is the process's client URL.
func (p *Process) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(p.Port) }

// Start (re)starts the process on its port and store and waits until
// JetStream answers.
func (p *Process) Start() {
	p.t.Helper()
	if err := p.start(); err != nil {
		p.t.Fatal(err)
	}
}

// start runs the process and waits until it, by its server name, answers
// JetStream's INFO on its port. Another server answering there ends the
// wait with errPortTaken, after this process is killed.
func (p *Process) start() error {
	if p.cmd != nil {
		return errors.New("jstest: nats-server already running")
	}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(p.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-js", "-sd", p.Dir,
		"--server_name", p.name)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("jstest: starting %s: %w", p.bin, err)
	}
	p.cmd = cmd
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		nc, err := nats.Connect(p.URL(), nats.Timeout(time.Second))
		if err == nil {
			other := nc.ConnectedServerName()
			if other != p.name {
				nc.Close()
				p.Kill()
				return fmt.Errorf("jstest: port %d: %w (%q, not %q)\n%s", p.Port, errPortTaken, other, p.name, tail(p.log))
			}
			_, err = nc.Request("$JS.API.INFO", nil, time.Second)
			nc.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("jstest: nats-server on port %d not ready: %w\n%s", p.Port, err, tail(p.log))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Kill sends SIGKILL and waits for the process to end.
func (p *Process) Kill() {
	p.t.Helper()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
	p.cmd = nil
}

// Pause stops the process (SIGSTOP) without closing its connections: a
// broker that stalls, so publishes time out with their outcome unknown.
func (p *Process) Pause() {
	p.t.Helper()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(syscall.SIGSTOP)
	}
}

// Resume continues a paused process (SIGCONT).
func (p *Process) Resume() {
	p.t.Helper()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// freePort picks a free port below the kernel's ephemeral range (32768
// and up): a process restarted on its port must find it free, and a port
// from the ephemeral range, once closed, can be handed to any of the
// suite's parallel tests that listen on port 0 or dial out; the restart
// would then fail to bind while the readiness check reached the other
// listener (an embedded server answers JetStream's INFO too).
func freePort(t testing.TB) int {
	t.Helper()
	for range 200 {
		p := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err == nil {
			_ = l.Close()
			return p
		}
	}
	t.Fatal("jstest: no free port in 20000..31999")
	return 0
}

func tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 20 {
			lines = lines[1:]
		}
	}
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}
