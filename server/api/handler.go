// Package api is Keel's admin API: a mountable http.Handler serving JSON
// under /api/v1/. Every route declares its required role in one table
// (routes), errors are application/problem+json with stable codes (one
// catalogue, one mapping function), bodies are decoded strictly and every
// list pages by cursor.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/server/auth"
)

// Prefix is where the API's routes live.
const Prefix = "/api/v1"

// Config configures a Handler.
type Config struct {
	// Engine is the keel.Client the API reads and controls. Required.
	Engine Engine
	// Auth stores tokens. Required unless Authenticate is set and the token
	// routes are not used.
	Auth *auth.Store
	// Authenticate, if set, replaces bearer-token authentication (the CLI's
	// local mode uses it to act as the local operator).
	Authenticate func(r *http.Request) (*auth.Principal, error)
	// Logger receives internal errors. Default slog.Default().
	Logger *slog.Logger
	// Modules add their routes (absolute paths) to the API, under the same
	// authentication, roles, audit actor and problem documents.
	Modules []module.Web
}

// Handler serves the admin API.
type Handler struct {
	engine Engine
	store  *auth.Store
	authn  func(r *http.Request) (*auth.Principal, error)
	logger *slog.Logger
	router chi.Router
	roles  map[string]auth.Role
	// modulePatterns are the module routes (absolute paths).
	modulePatterns []string
	// searchers are the modules' lookups by id (GET /search).
	searchers []Searcher
}

// endpoint handles one route; it returns the status and body to write, or
// an error to write as a problem.
type endpoint func(w http.ResponseWriter, r *http.Request) (int, any, error)

type route struct {
	method, pattern string
	role            auth.Role
	handle          endpoint
}

// routes is the one place that says which role each route requires.
func (h *Handler) routes() []route {
	return []route{
		{"GET", "/me", auth.RoleViewer, h.me},
		{"GET", "/jobs", auth.RoleViewer, h.jobList},
		{"GET", "/jobs/{id}", auth.RoleViewer, h.jobGet},
		{"POST", "/jobs/{id}/cancel", auth.RoleOperator, h.jobCancel},
		{"POST", "/jobs/{id}/retry", auth.RoleOperator, h.jobRetry},
		{"DELETE", "/jobs/{id}", auth.RoleOperator, h.jobDelete},
		{"GET", "/queues", auth.RoleViewer, h.queueList},
		{"POST", "/queues/{name}/pause", auth.RoleOperator, h.queuePause},
		{"POST", "/queues/{name}/resume", auth.RoleOperator, h.queueResume},
		{"GET", "/flow/limits", auth.RoleViewer, h.limitList},
		{"PUT", "/flow/limits", auth.RoleAdmin, h.limitSet},
		{"DELETE", "/flow/limits", auth.RoleAdmin, h.limitDelete},
		{"GET", "/flow/keys", auth.RoleViewer, h.keyList},
		{"GET", "/flow/keys/{key}", auth.RoleViewer, h.keyGet},
		{"POST", "/flow/keys/{key}/pause", auth.RoleOperator, h.keyPause},
		{"POST", "/flow/keys/{key}/resume", auth.RoleOperator, h.keyResume},
		{"POST", "/flow/keys/{key}/close-breaker", auth.RoleOperator, h.keyCloseBreaker},
		// Batches (bulk tasks): read and control only. There is no create
		// route: creation needs a module's keel.BatchSource (preview token →
		// keel.BatchCreate), and no module is wired into the server yet.
		{"GET", "/batches", auth.RoleViewer, h.batchList},
		{"GET", "/batches/{id}", auth.RoleViewer, h.batchGet},
		{"GET", "/batches/{id}/items", auth.RoleViewer, h.batchItems},
		{"POST", "/batches/{id}/pause", auth.RoleOperator, h.batchPause},
		{"POST", "/batches/{id}/resume", auth.RoleOperator, h.batchResume},
		{"POST", "/batches/{id}/terminate", auth.RoleOperator, h.batchTerminate},
		{"POST", "/batches/{id}/keys/{key}/resume", auth.RoleOperator, h.batchKeyResume},
		{"GET", "/audit", auth.RoleViewer, h.auditList},
		{"GET", "/search", auth.RoleViewer, h.search},
		{"GET", "/tokens", auth.RoleAdmin, h.tokenList},
		{"POST", "/tokens", auth.RoleAdmin, h.tokenCreate},
		{"DELETE", "/tokens/{id}", auth.RoleAdmin, h.tokenRevoke},
	}
}

// NewHandler builds the API.
func NewHandler(cfg *Config) (*Handler, error) {
	if cfg == nil || cfg.Engine == nil {
		return nil, errors.New("api: Config.Engine is required")
	}
	if cfg.Auth == nil && cfg.Authenticate == nil {
		return nil, errors.New("api: Config.Auth or Config.Authenticate is required")
	}
	h := &Handler{engine: cfg.Engine, store: cfg.Auth, authn: cfg.Authenticate, logger: cfg.Logger,
		roles: map[string]auth.Role{}}
	if h.logger == nil {
		h.logger = slog.Default()
	}
	if h.authn == nil {
		h.authn = h.bearer
	}
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		WriteProblem(w, r, h.logger, Errorf(CodeNotFound, "no such route"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		WriteProblem(w, r, h.logger, Errorf(CodeMethodNotAllowed, "%s is not allowed here", r.Method))
	})
	r.Route(Prefix, func(sub chi.Router) {
		for _, rt := range h.routes() {
			sub.Method(rt.method, rt.pattern, h.guard(rt))
			h.roles[rt.method+" "+Prefix+rt.pattern] = rt.role
		}
	})
	h.searchers = Searchers(cfg.Modules)
	if err := h.addModules(r, cfg.Modules); err != nil {
		return nil, err
	}
	h.router = r
	return h, nil
}

// addModules registers each module route at its absolute path. The paths
// are collected in ModulePatterns so that the server sends them here.
func (h *Handler) addModules(r chi.Router, mods []module.Web) error {
	for _, m := range mods {
		for _, mr := range m.Routes() {
			method, path, ok := strings.Cut(mr.Pattern, " ")
			if !ok || !strings.HasPrefix(path, "/") {
				return fmt.Errorf("api: module %s: route %q must be \"METHOD /path\"", m.Name(), mr.Pattern)
			}
			role, err := roleOf(mr.Role)
			if err != nil {
				return fmt.Errorf("api: module %s: route %q: %w", m.Name(), mr.Pattern, err)
			}
			key := method + " " + path
			if _, dup := h.roles[key]; dup {
				return fmt.Errorf("api: module %s: route %q is already taken", m.Name(), mr.Pattern)
			}
			r.Method(method, path, h.guard(route{method, path, role, mr.Handle}))
			h.roles[key] = role
			h.modulePatterns = append(h.modulePatterns, key)
		}
	}
	return nil
}

// roleOf maps a module's role onto the server's.
func roleOf(r module.Role) (auth.Role, error) {
	switch r {
	case module.RoleViewer:
		return auth.RoleViewer, nil
	case module.RoleOperator:
		return auth.RoleOperator, nil
	case module.RoleAdmin:
		return auth.RoleAdmin, nil
	}
	return auth.RoleNone, fmt.Errorf("no role declared (module routes are never public)")
}

// ModulePatterns lists the module routes as "METHOD /path" (ServeMux form).
func (h *Handler) ModulePatterns() []string { return h.modulePatterns }

// ServeHTTP serves the API's routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.router.ServeHTTP(w, r) }

// Router exposes the router (tests walk it).
func (h *Handler) Router() chi.Router { return h.router }

// RequiredRole says which role a route (as chi.Walk names it) requires.
func (h *Handler) RequiredRole(method, pattern string) (auth.Role, bool) {
	r, ok := h.roles[method+" "+pattern]
	return r, ok
}

func (h *Handler) bearer(r *http.Request) (*auth.Principal, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || h.store == nil {
		return nil, auth.ErrUnauthenticated
	}
	p, err := h.store.Authenticate(r.Context(), strings.TrimSpace(token))
	return p, RejectedToken(err)
}

type principalKey struct{}

// PrincipalFrom returns the request's authenticated principal.
func PrincipalFrom(ctx context.Context) *auth.Principal {
	p, _ := ctx.Value(principalKey{}).(*auth.Principal)
	return p
}

// guard authenticates, checks the route's role, names the actor for
// auditing and writes the endpoint's result.
func (h *Handler) guard(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := h.authn(r)
		if err != nil {
			WriteProblem(w, r, h.logger, err)
			return
		}
		if !p.Role.Allows(rt.role) {
			WriteProblem(w, r, h.logger, Errorf(CodeForbidden, "%s requires role %s; token %q has %s", rt.pattern, rt.role, p.Name, p.Role))
			return
		}
		ctx := keel.WithActor(context.WithValue(r.Context(), principalKey{}, p), p.Actor())
		status, body, err := rt.handle(w, r.WithContext(ctx))
		if err != nil {
			WriteProblem(w, r, h.logger, err)
			return
		}
		writeJSON(w, status, body)
	})
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if body != nil {
		_ = json.NewEncoder(w).Encode(body)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func (h *Handler) me(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	if q := newQuery(r); q.Err != nil {
		return 0, nil, q.Err
	}
	p := PrincipalFrom(r.Context())
	return http.StatusOK, &Me{Name: p.Name, Role: p.Role.String()}, nil
}

func ok(v any, err error) (int, any, error) {
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, v, nil
}

func wrapf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}
