// Package console is Keel's operations console: server-rendered pages
// (html/template, embedded), zh-CN first with an English switch, a little
// plain JS for confirmation dialogs, and charts drawn as SVG from the
// server's own samples. Logins are server-side session rows behind a
// Secure (when configured), HttpOnly, SameSite=Strict cookie; every
// state-changing form carries the session's CSRF token.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/server/api"
	"github.com/keelwork/keel/server/auth"
)

//go:embed templates/*.html static/*
var assets embed.FS

const sessionCookie = "keel_session"

// Config configures the console.
type Config struct {
	Engine         api.Engine
	Auth           *auth.Store
	CookieSecure   bool
	SessionTTL     time.Duration
	SampleInterval time.Duration
	Logger         *slog.Logger
	// Modules add their pages and navigation entries.
	Modules []module.Web
}

// Console serves the pages.
type Console struct {
	cfg     Config
	pages   map[string]*template.Template
	mux     *http.ServeMux
	sampler *sampler
	roles   map[string]auth.Role
	groups  []*navGroup
	// searchers are the installed modules' lookups by id.
	searchers []api.Searcher
}

type page struct {
	pattern string
	role    auth.Role
	handle  func(c *Console, w http.ResponseWriter, r *http.Request, v *view) error
	// group is the navigation group the page belongs to ("": the engine's).
	group string
}

// pageRoutes is the one place that says which role each console route
// requires (RoleNone: public). POST routes also require the CSRF token.
var pageRoutes = []page{
	{"GET /login", auth.RoleNone, (*Console).loginPage, ""},
	{"POST /login", auth.RoleNone, (*Console).login, ""},
	{"POST /logout", auth.RoleViewer, (*Console).logout, ""},
	{"GET /{$}", auth.RoleViewer, (*Console).overview, ""},
	{"GET /jobs", auth.RoleViewer, (*Console).jobs, ""},
	{"GET /jobs/{id}", auth.RoleViewer, (*Console).job, ""},
	{"POST /jobs/{id}/{action}", auth.RoleOperator, (*Console).jobAction, ""},
	{"GET /queues", auth.RoleViewer, (*Console).queues, ""},
	{"POST /queues/{name}/{action}", auth.RoleOperator, (*Console).queueAction, ""},
	{"GET /keys", auth.RoleViewer, (*Console).keys, ""},
	{"GET /keys/{key}", auth.RoleViewer, (*Console).key, ""},
	{"POST /keys/{key}/{action}", auth.RoleOperator, (*Console).keyAction, ""},
	{"POST /limits", auth.RoleAdmin, (*Console).limitSet, ""},
	{"POST /limits/delete", auth.RoleAdmin, (*Console).limitDelete, ""},
	{"GET /batches", auth.RoleViewer, (*Console).batches, ""},
	{"GET /batches/{id}", auth.RoleViewer, (*Console).batch, ""},
	{"POST /batches/{id}/{action}", auth.RoleOperator, (*Console).batchAction, ""},
	{"POST /batches/{id}/keys/{key}/resume", auth.RoleOperator, (*Console).batchKeyResume, ""},
	{"GET /audit", auth.RoleViewer, (*Console).audit, ""},
	{"GET /search", auth.RoleViewer, (*Console).search, ""},
	{"GET /home/{module}", auth.RoleViewer, (*Console).home, ""},
}

// New parses the templates and builds the console.
func New(cfg *Config) (*Console, error) {
	if cfg.Engine == nil || cfg.Auth == nil {
		return nil, errors.New("console: Engine and Auth are required")
	}
	c := &Console{cfg: *cfg, pages: map[string]*template.Template{}, mux: http.NewServeMux(), roles: map[string]auth.Role{}}
	if c.cfg.Logger == nil {
		c.cfg.Logger = slog.Default()
	}
	c.sampler = newSampler(cfg.Engine, cfg.SampleInterval)
	c.groups = buildNav(cfg.Modules)
	c.searchers = api.Searchers(cfg.Modules)
	for _, g := range c.groups {
		if g.homer != nil {
			c.sampler.homes = append(c.sampler.homes, homeSource{name: g.Key, homer: g.homer})
		}
	}
	if err := c.parse(); err != nil {
		return nil, err
	}
	static, _ := fs.Sub(assets, "static")
	c.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	for _, p := range pageRoutes {
		c.mux.Handle(p.pattern, c.wrap(p))
		c.roles[p.pattern] = p.role
	}
	if err := c.addModules(cfg.Modules); err != nil {
		return nil, err
	}
	// Every other path is a page in the layout, not Go's bare 404.
	c.mux.HandleFunc("/", c.notFound)
	return c, nil
}

func (c *Console) parse() error {
	names, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return err
	}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", n)
		if err != nil {
			return fmt.Errorf("console: parsing %s: %w", n, err)
		}
		c.pages[base] = t
	}
	return nil
}

// Roles lists every console route with its required role.
func (c *Console) Roles() map[string]auth.Role { return c.roles }

func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	c.mux.ServeHTTP(w, r)
}

// view is what every template gets.
type view struct {
	// Groups are the navigation: the engine's and each module's group;
	// GroupOn is the current group's key, NavOn the current page's path.
	Groups    []*navGroup
	GroupOn   string
	NavOn     string
	Lang      string
	Page      string
	Principal *auth.Principal
	CSRF      string
	Flash     string
	Error     string
	Path      string
	Data      any
}

func (v *view) T(key string) string { return word(v.Lang, key) }

// CanOperate and CanAdmin let templates hide actions a role may not take.
func (v *view) CanOperate() bool {
	return v.Principal != nil && v.Principal.Role.Allows(auth.RoleOperator)
}
func (v *view) CanAdmin() bool { return v.Principal != nil && v.Principal.Role.Allows(auth.RoleAdmin) }

func (c *Console) wrap(p page) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		group := p.group
		if group == "" {
			group = engineGroup
		}
		v := &view{Groups: c.groups, GroupOn: group, Lang: langOf(w, r), Path: r.URL.Path, Flash: r.URL.Query().Get("flash"), Error: r.URL.Query().Get("err")}
		if r.Method == http.MethodPost && !sameOrigin(r) {
			c.refuse(w, v, "cross-origin form post refused")
			return
		}
		if p.role != auth.RoleNone {
			pr, err := c.principal(r)
			if err != nil {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			v.Principal, v.CSRF = pr, pr.CSRF
			if r.Method == http.MethodPost {
				r.Body = http.MaxBytesReader(w, r.Body, api.MaxBodyBytes)
				if !auth.CSRFMatches(pr, r.PostFormValue("csrf")) {
					c.refuse(w, v, "missing or wrong CSRF token")
					return
				}
			}
			if !pr.Role.Allows(p.role) {
				c.back(w, r, "", word(v.Lang, "forbidden"))
				return
			}
			r = r.WithContext(keel.WithActor(r.Context(), pr.Actor()))
		}
		if err := p.handle(c, w, r, v); err != nil {
			c.fail(w, r, v, err)
		}
	})
}

// sameOrigin refuses form posts whose Origin names another site (the
// SameSite=Strict cookie already keeps them unauthenticated).
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return o == ""
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (c *Console) principal(r *http.Request) (*auth.Principal, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, auth.ErrUnauthenticated
	}
	return c.cfg.Auth.Session(r.Context(), ck.Value)
}

func (c *Console) render(w http.ResponseWriter, v *view, name string, data any) error {
	t, ok := c.pages[name]
	if !ok {
		return fmt.Errorf("console: no template %q", name)
	}
	v.Page, v.Data = name, data
	if v.NavOn == "" {
		v.NavOn = enginePages[name]
	}
	var b strings.Builder
	if err := t.Execute(&b, v); err != nil {
		return fmt.Errorf("rendering %s: %w", name, err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, err := w.Write([]byte(b.String()))
	return err
}

// fail shows an error: problems the operator can act on go back to the
// page with the message; internal errors are logged, not shown.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, v *view, err error) {
	p := api.FromError(err)
	msg := p.Detail
	if p.Code == api.CodeInternal {
		c.cfg.Logger.Error("console request failed", "path", r.URL.Path, "error", err)
		msg = p.Title
	}
	if r.Method == http.MethodPost {
		pv := problemOf(v.Lang, p)
		c.back(w, r, "", word(v.Lang, "error")+": "+pv.Words+msgSuffix(pv, msg))
		return
	}
	c.showProblem(w, v, p)
}

// back redirects a form post to the page it came from (same site only)
// with a flash or error message.
func (c *Console) back(w http.ResponseWriter, r *http.Request, flash, errMsg string) {
	target := r.PostFormValue("back")
	if !strings.HasPrefix(target, "/") || strings.HasPrefix(target, "//") {
		target = "/"
	}
	u, err := url.Parse(target)
	if err != nil {
		u = &url.URL{Path: "/"}
	}
	q := u.Query()
	q.Del("flash")
	q.Del("err")
	if flash != "" {
		q.Set("flash", flash)
	}
	if errMsg != "" {
		q.Set("err", errMsg)
	}
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request, v *view) error {
	return c.render(w, v, "login", nil)
}

func (c *Console) login(w http.ResponseWriter, r *http.Request, v *view) error {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	p, err := c.cfg.Auth.Authenticate(r.Context(), strings.TrimSpace(r.PostFormValue("token")))
	if err != nil {
		w.WriteHeader(http.StatusUnauthorized)
		v.Error = word(v.Lang, "login_failed")
		return c.render(w, v, "login", nil)
	}
	cookie, err := c.cfg.Auth.CreateSession(r.Context(), p, c.cfg.SessionTTL)
	if err != nil {
		return err
	}
	ctx := keel.WithActor(r.Context(), p.Actor())
	if err := c.cfg.Engine.AuditRecord(ctx, keel.Audit{Action: "session.login", Target: "token:" + fmt.Sprint(p.TokenID)}); err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: cookie, Path: "/", MaxAge: int(c.cfg.SessionTTL.Seconds()),
		HttpOnly: true, Secure: c.cfg.CookieSecure, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
	return nil
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, v *view) error {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		if err := c.cfg.Auth.EndSession(r.Context(), ck.Value); err != nil {
			return err
		}
	}
	_ = c.cfg.Engine.AuditRecord(r.Context(), keel.Audit{Action: "session.logout", Target: "token:" + fmt.Sprint(v.Principal.TokenID)})
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: c.cfg.CookieSecure, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
	return nil
}

// StartSampler begins sampling for the overview charts.
func (c *Console) StartSampler(ctx context.Context) { c.sampler.start(ctx) }

// StopSampler stops sampling; idempotent.
func (c *Console) StopSampler() { c.sampler.stop() }
