package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/keelwork/keel/server"
	"github.com/keelwork/keel/server/auth"
)

// DevOpts are the flags of `keel dev`.
type DevOpts struct {
	DataDir string
	// Addr for the console and API. Default DefaultDevAddr.
	Addr string
	Out  io.Writer
	// ModuleSettings are passed to the modules (module.key → value).
	ModuleSettings map[string]string
	// NATSPort is the embedded NATS server's port on 127.0.0.1; 0 picks a
	// free one.
	NATSPort int
	// Ready, if set, is called with the server's URL once everything runs
	// (tests synchronise on it).
	Ready func(url string)
	// Modules, if set, runs only these modules (names as in
	// KEEL_MODULES); nil runs every one. A test of one module's demo sets
	// it: every module's demo at once keeps a core busy under -race.
	Modules []string
}

// DefaultDevAddr is where `keel dev` listens: loopback only.
const DefaultDevAddr = "127.0.0.1:8080"

// Dev runs Keel on embedded SQLite with the console and demo work until
// ctx ends. Running it again resumes the same data. On the first run it
// creates an admin token and prints it once; it is stored hashed.
func Dev(ctx context.Context, o *DevOpts) error {
	path := filepath.Join(o.DataDir, "keel.db")
	fmt.Fprintf(o.Out, "keel dev: embedded SQLite at %s\n", path)
	if o.Addr == "" {
		o.Addr = DefaultDevAddr
	}
	// Exports are files beside the database, so a dev run on another data
	// folder (a test's temporary one) keeps them there and not in the
	// directory it was started from.
	if _, set := o.ModuleSettings["export.dir"]; !set {
		ms := make(map[string]string, len(o.ModuleSettings)+1)
		for k, v := range o.ModuleSettings {
			ms[k] = v
		}
		ms["export.dir"] = filepath.Join(o.DataDir, "exports")
		o.ModuleSettings = ms
	}
	so := &ServeOpts{Addr: o.Addr, Demo: true, Migrate: true, ShutdownTimeout: 15 * time.Second,
		SessionTTL: server.DefaultSessionTTL, SampleInterval: 5 * time.Second, LogLevel: "warn",
		Queues: map[string]int{"default": 20, "notify": 10}, Modules: moduleNames(), ModuleSettings: o.ModuleSettings}
	if o.Modules != nil {
		so.Modules = o.Modules
	}
	// Events travel on an embedded NATS JetStream, stored beside the
	// database, so dev runs the same bus as a production deployment.
	return boundedRun(ctx, so.ShutdownTimeout, o.Out, func(ctx context.Context) error {
		ns, err := startDevNATS(o.DataDir, o.NATSPort, o.Out)
		if err != nil {
			return err
		}
		// The broker stops last, after serve's "stopped in". JetStream
		// writes each consumer's state to disk as it stops (a second or
		// two here), so the wait is named rather than left silent.
		defer func() {
			start := time.Now()
			ns.Shutdown()
			fmt.Fprintf(o.Out, "keel dev: embedded NATS stopped in %s (its streams and consumers written to disk)\n",
				time.Since(start).Round(10*time.Millisecond))
		}()
		so.NATSURL = ns.URL()
		return devServe(ctx, "sqlite:"+path, so, o)
	})
}

func devServe(ctx context.Context, url string, so *ServeOpts, o *DevOpts) error {
	return withServeDatabase(ctx, url, "", func(ctx context.Context, r *serveRun) error {
		return r.run(ctx, so, o.Out, func(s *server.Server, store *auth.Store) error {
			if err := devToken(ctx, store, o.Out, url); err != nil {
				return err
			}
			fmt.Fprintf(o.Out, "keel dev: console %s/\n", s.URL())
			fmt.Fprintln(o.Out, "keel dev: running; demo orders and notifications arrive every few seconds. Ctrl-C stops cleanly.")
			if o.Ready != nil {
				o.Ready(s.URL())
			}
			return nil
		})
	})
}

// devToken prints a new admin token on the first run only.
func devToken(ctx context.Context, store *auth.Store, out io.Writer, url string) error {
	exists, err := store.HasActiveToken(ctx, auth.RoleAdmin)
	if err != nil {
		return fmt.Errorf("looking for an admin token: %w", err)
	}
	if exists {
		fmt.Fprintf(out, "keel dev: an admin token already exists (shown only when created). New one: keel tokens create --role admin --name me --database-url %s\n", url)
		return nil
	}
	secret, _, err := store.CreateToken(ctx, "dev-admin", auth.RoleAdmin, "keel dev", "first run of keel dev")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "keel dev: admin token (shown once, stored hashed): %s\n", secret)
	return nil
}
