// Package server is Keel's HTTP server: the admin API (server/api), the
// operations console (server/console), /metrics, /healthz and /readyz, as
// one http.Handler with a Start/Shutdown lifecycle.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/server/api"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/console"
)

// Defaults for Config fields.
const (
	DefaultAddr           = ":8080"
	DefaultSessionTTL     = 12 * time.Hour
	DefaultSampleInterval = 10 * time.Second
)

// Config configures a Server.
type Config struct {
	// Addr to listen on. Default ":8080"; port 0 picks a free one.
	Addr string
	// Engine is the keel.Client served. Required.
	Engine api.Engine
	// Auth stores tokens and sessions. Required.
	Auth *auth.Store
	// Gatherer is exposed at /metrics; nil exposes nothing there.
	Gatherer prometheus.Gatherer
	// CookieSecure marks the session cookie Secure (set it whenever the
	// console is reached over HTTPS). Default false.
	CookieSecure bool
	// SessionTTL is how long a console login lasts. Default 12h.
	SessionTTL time.Duration
	// SampleInterval is how often the console samples for its charts.
	// Default 10s.
	SampleInterval time.Duration
	// Logger receives request failures. Default slog.Default().
	Logger *slog.Logger
	// Modules are the business systems served: their API routes, console
	// pages and navigation.
	Modules []module.Web
}

// Server serves the API, the console and the probes.
type Server struct {
	cfg      Config
	api      *api.Handler
	console  *console.Console
	handler  http.Handler
	http     *http.Server
	listener net.Listener
	draining atomic.Bool
	done     chan error
}

// New validates cfg and builds the server; Start listens.
func New(cfg *Config) (*Server, error) {
	if cfg == nil || cfg.Engine == nil || cfg.Auth == nil {
		return nil, errors.New("server: Config.Engine and Config.Auth are required")
	}
	c := *cfg
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.SampleInterval == 0 {
		c.SampleInterval = DefaultSampleInterval
	}
	if c.SessionTTL < time.Minute || c.SampleInterval < 100*time.Millisecond {
		return nil, errors.New("server: SessionTTL must be at least 1m and SampleInterval at least 100ms")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	a, err := api.NewHandler(&api.Config{Engine: c.Engine, Auth: c.Auth, Logger: c.Logger, Modules: c.Modules})
	if err != nil {
		return nil, err
	}
	con, err := console.New(&console.Config{Engine: c.Engine, Auth: c.Auth, CookieSecure: c.CookieSecure,
		SessionTTL: c.SessionTTL, SampleInterval: c.SampleInterval, Logger: c.Logger,
		Modules: c.Modules})
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: c, api: a, console: con, done: make(chan error, 1)}
	h, err := s.routes()
	if err != nil {
		return nil, err
	}
	s.handler = h
	return s, nil
}

func (s *Server) routes() (http.Handler, error) {
	mux := http.NewServeMux()
	mux.Handle(api.Prefix+"/", s.api)
	taken := map[string]bool{}
	for _, p := range s.api.ModulePatterns() {
		_, path, _ := strings.Cut(p, " ")
		taken[path] = true
	}
	if err := mountIngress(mux, s.cfg.Modules, taken); err != nil {
		return nil, err
	}
	// Module paths go to the API whatever the method, so that a wrong
	// method gets the API's 405 problem rather than the console's 404.
	seen := map[string]bool{}
	for _, p := range s.api.ModulePatterns() {
		_, path, _ := strings.Cut(p, " ")
		if !seen[path] {
			seen[path] = true
			mux.Handle(path, s.api)
		}
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", s.ready)
	if s.cfg.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{}))
	}
	mux.Handle("/", s.console)
	return mux, nil
}

// mountIngress mounts the modules' public endpoints (module.Ingress) on
// mux, outside the API's authentication. A pattern without a method,
// under the API's prefix or on a path another route holds is refused, so
// a module cannot make an authenticated path public.
func mountIngress(mux *http.ServeMux, mods []module.Web, taken map[string]bool) error {
	for _, m := range mods {
		in, ok := m.(module.Ingress)
		if !ok {
			continue
		}
		for _, e := range in.Ingress() {
			method, path, ok := strings.Cut(e.Pattern, " ")
			switch {
			case !ok || method == "" || !strings.HasPrefix(path, "/") || e.Handler == nil:
				return fmt.Errorf("server: module %s: ingress %q must be \"METHOD /path\" with a handler", m.Name(), e.Pattern)
			case path == api.Prefix || strings.HasPrefix(path, api.Prefix+"/") || strings.HasPrefix(path, "/api/"):
				return fmt.Errorf("server: module %s: ingress %q is under the API", m.Name(), e.Pattern)
			case taken[path] || path == "/healthz" || path == "/readyz" || path == "/metrics" || path == "/":
				return fmt.Errorf("server: module %s: ingress %q is already taken", m.Name(), e.Pattern)
			}
			taken[path] = true
			mux.Handle(e.Pattern, e.Handler)
		}
	}
	return nil
}

// ready answers 200 while the database answers and the server is not
// draining, so load balancers stop sending before shutdown.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	if s.draining.Load() {
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.cfg.Engine.Ping(ctx); err != nil {
		http.Error(w, "database unavailable", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// Handler is the whole server as an http.Handler (for tests and embedding).
func (s *Server) Handler() http.Handler { return s.handler }

// API is the admin API handler.
func (s *Server) API() *api.Handler { return s.api }

// Start listens and serves in the background, and starts the console's
// sampler; it returns once the listener is open.
func (s *Server) Start(ctx context.Context) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.cfg.Addr, err)
	}
	s.listener = ln
	s.http = &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	s.console.StartSampler(context.WithoutCancel(ctx))
	go func() {
		err := s.http.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return nil
}

// URL is the base URL the server listens on (loopback form for ":port").
func (s *Server) URL() string {
	addr := s.listener.Addr().(*net.TCPAddr)
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(addr.Port))
}

// Shutdown marks the server not ready, stops accepting, waits for requests
// in flight until ctx ends, and stops the sampler. Idempotent.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.console.StopSampler()
	if s.http == nil {
		return nil
	}
	return s.http.Shutdown(ctx)
}
