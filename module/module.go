// Package module is the seam between Keel's server and the business systems
// it hosts (reservation release, SMS delivery, ...). A module brings its
// tables (a migration line), its workers and periodic jobs, its HTTP routes,
// its console pages, demo data and the simulators of its outside world; the
// server brings authentication, roles, audit actors, problem+json errors and
// the console's layout. Modules use only the engine's public API (package
// keel) and this package; they never import the server or each other.
package module

import (
	"context"
	"html/template"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module/web"
)

// Role is what a caller must be to use a route or page. The order matters:
// a higher role may do everything a lower one may.
type Role int

// Roles, mirroring the server's token roles.
const (
	RoleViewer Role = iota + 1
	RoleOperator
	RoleAdmin
)

// Route is one admin API endpoint. Pattern is absolute and in net/http's
// ServeMux form ("GET /api/v1/reservation/slots/{id}"): a module may own
// paths a specification fixes. Handle returns the status and the value to
// encode as JSON, or an error the server writes as problem+json (see Error).
// The request's context carries the authenticated actor (keel.ActorFrom), so
// engine control actions are audited with it.
type Route struct {
	Pattern string
	Role    Role
	Handle  func(w http.ResponseWriter, r *http.Request) (status int, body any, err error)
}

// Page is one console page or form action. Pattern is in ServeMux form
// relative to the console root ("GET /reservations", "POST
// /reservations/{id}/checkin"). POST pages are checked for the session's
// CSRF token (form field "csrf") before Handle runs. Handle either returns a
// page to render inside the console layout, or writes the response itself
// (a redirect after a form post) and returns nil.
type Page struct {
	Pattern string
	Role    Role
	Handle  func(w http.ResponseWriter, r *http.Request, v *View) (*Rendered, error)
}

// View is what the console tells a page about the request.
type View struct {
	// Lang is "zh" (default) or "en".
	Lang string
	// CSRF is the session's token; every form must send it as field "csrf".
	CSRF string
	// Actor names the logged-in operator (as audited).
	Actor string
	// Role is the caller's role.
	Role Role
	// Flash and Error are messages carried by a redirect (?flash=, ?err=).
	Flash, Error string
}

// Zh picks the Chinese or English text for the view's language.
func (v *View) Zh(zh, en string) string {
	if v.Lang == "en" {
		return en
	}
	return zh
}

// TimeHead is the head of a table column of times shown by web.Time:
// the name in the view's language with the zone ("创建时间（北京时间）").
func (v *View) TimeHead(zh, en string) string { return web.TimeHead(v.Lang, zh, en, nil) }

// Who names who did something (an audit or history actor such as
// "token:alice", "system:scanner") in the view's language: the raw value
// belongs in the cell's title (web.ActorWord).
func (v *View) Who(a string) string { return web.ActorWord(v.Lang, a) }

// TimeZoned is a time (time.Time or *time.Time) with its zone, for one
// that stands outside a time column (web.TimeZoned).
func (v *View) TimeZoned(t any) string { return web.TimeZoned(v.Lang, t) }

// DateInput is the console's date field (web.DateInput) in the view's
// language.
func (v *View) DateInput(name, value string) template.HTML { return web.DateInput(v.Lang, name, value) }

// DateTimeInput is the console's date-and-time field (web.DateTimeInput).
func (v *View) DateTimeInput(name, value string) template.HTML {
	return web.DateTimeInput(v.Lang, name, value)
}

// Can reports whether the caller holds at least role.
func (v *View) Can(role Role) bool { return v.Role >= role }

// Rendered is a page's content; the console puts it in its layout (header,
// navigation, language switch, confirmation dialog).
type Rendered struct {
	// Title is the page's title in the view's language.
	Title string
	// Nav is the Path of the NavItem to mark current.
	Nav string
	// Body is the page content, rendered by the module's own templates.
	Body template.HTML
}

// NavItem is an entry in the console's navigation.
type NavItem struct {
	Path   string
	ZH, EN string
}

// Web is what the server needs of a module: its name, routes, pages and
// navigation. It does not depend on the database driver.
type Web interface {
	// Name is short and stable ("reservation", "delivery").
	Name() string
	Routes() []Route
	Pages() []Page
	Nav() []NavItem
}

// Module is a business system on a database whose transactions are TTx.
// The host calls, in order: Lines (migrations), Configure (before the
// engine client is built), Start (after it started), and Stop.
type Module[TTx any] interface {
	Web
	// Lines are the module's migration lines for the host's dialect.
	Lines() []keelmigrate.Line
	// Configure registers workers and periodic jobs and adds queues.
	Configure(cfg *keel.Config) error
	// Start begins the module's background work (listeners, simulators,
	// demo data when Host.Demo) and returns once it runs.
	Start(ctx context.Context, client *keel.Client[TTx]) error
	// Stop ends the background work, waiting until ctx ends at most.
	Stop(ctx context.Context) error
}

// Host is what a module is given to build itself.
type Host[TTx any] struct {
	// DB runs the module's SQL; its transactions' Native() values go to
	// the engine's InsertTx and CompleteTx.
	DB keelsql.DB[TTx]
	// Logger for the module's own logs.
	Logger *slog.Logger
	// Registerer for the module's metrics (may be nil: don't register).
	Registerer prometheus.Registerer
	// Clock is what the module reads the time from (nil: time.Now); the
	// module test kit sets a controllable one.
	Clock func() time.Time
	// Demo asks for demo data and running simulators (`keel dev`).
	Demo bool
	// Settings are module settings from the server's configuration
	// (flags, environment, file), keyed "<module>.<name>".
	Settings map[string]string
	// Events is the events backbone: EmitTx in the module's transactions,
	// Consume (in New or Configure, before Start) for its consumers. Nil
	// when the host runs without events (then a module that needs them
	// refuses to build).
	Events *keelevents.Events[TTx]
	// Recon runs the module's reconcilers (Recon.Register in the module's
	// constructor) and holds the four-eyes approvals (Recon.Approvals) for
	// actions of kinds the module registers. Nil where the host offers none.
	Recon *keelrecon.Recon[TTx]
	// Services are what the server's modules offer one another (an SMS
	// sender, ...): shared by every module of one server; nil offers
	// nothing.
	Services *Services
}
