package module

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsql/sqlfile"
)

// ErrNotStarted is returned by what needs the engine client before the
// module's Start was given it.
var ErrNotStarted = errors.New("module not started")

// Base is what every module keeps of its host, read once in New: the
// database, a logger, the clock, the metrics registerer, the engine client
// once Start binds it, and the lifecycle of its background work. A module
// embeds it (or holds one) instead of writing each of these itself:
//
//	type Module[TTx any] struct {
//		*module.Base[TTx]
//		q sqlfile.Set
//	}
//
//	func New[TTx any](h *module.Host[TTx]) (*Module[TTx], error) {
//		b, err := module.NewBase("notes", h)
//		if err != nil {
//			return nil, err
//		}
//		q, err := b.Queries(queryFiles, "queries")
//		...
//	}
type Base[TTx any] struct {
	// Name is the module's name, as in its settings' prefix and logs.
	Name string
	// DB runs the module's SQL.
	DB keelsql.DB[TTx]
	// Log is the host's logger with module=Name, or one that discards:
	// a module built without a logger (a library use, a test) stays quiet.
	Log *slog.Logger
	// Demo is Host.Demo.
	Demo bool
	// Life owns the module's background goroutines.
	Life Lifecycle

	host   *Host[TTx]
	clock  func() time.Time
	reg    prometheus.Registerer
	engine Binding[TTx]
}

// NewBase reads what every module needs of h.
func NewBase[TTx any](name string, h *Host[TTx]) (*Base[TTx], error) {
	if h == nil || h.DB == nil {
		return nil, fmt.Errorf("%s: the host has no database", name)
	}
	b := &Base[TTx]{Name: name, DB: h.DB, Demo: h.Demo, host: h, clock: h.Clock, reg: h.Registerer}
	if b.clock == nil {
		b.clock = time.Now
	}
	log := h.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b.Log = log.With("module", name)
	return b, nil
}

// Host is the host the module was built from.
func (b *Base[TTx]) Host() *Host[TTx] { return b.host }

// Settings reads the module's own settings from the host's.
func (b *Base[TTx]) Settings() *Settings { return NewSettings(b.Name, b.host.Settings) }

// Now is the module's clock in UTC, truncated to microseconds so that both
// databases store exactly the instant the module compared.
func (b *Base[TTx]) Now() time.Time { return b.clock().UTC().Truncate(time.Microsecond) }

// Clock is the host's clock (time.Now unless a test set one).
func (b *Base[TTx]) Clock() func() time.Time { return b.clock }

// SetClock replaces the clock (a module option for tests); nil keeps it.
func (b *Base[TTx]) SetClock(now func() time.Time) {
	if now != nil {
		b.clock = now
	}
}

// Engine is the binding of the engine client, for parts of the module
// that are handed it rather than the Base.
func (b *Base[TTx]) Engine() *Binding[TTx] { return &b.engine }

// Bind keeps the engine client Start was given (see Binding.Bind).
func (b *Base[TTx]) Bind(c *keel.Client[TTx]) error { return b.engine.Bind(c) }

// Client is the engine client, or ErrNotStarted before Bind.
func (b *Base[TTx]) Client() (*keel.Client[TTx], error) { return b.engine.Client() }

// Binding holds the engine client a module is given in Start. Handlers and
// operations that may run before Start ask Client, which says so with
// ErrNotStarted instead of dereferencing nil.
type Binding[TTx any] struct {
	p atomic.Pointer[keel.Client[TTx]]
}

// Bind keeps c. Nil, or a second, different client, is an error; binding
// the same client again (a restarted module) is not.
func (e *Binding[TTx]) Bind(c *keel.Client[TTx]) error {
	if c == nil {
		return errors.New("start needs an engine client")
	}
	if !e.p.CompareAndSwap(nil, c) && e.p.Load() != c {
		return errors.New("started with a second engine client")
	}
	return nil
}

// Client is the bound client, or ErrNotStarted.
func (e *Binding[TTx]) Client() (*keel.Client[TTx], error) {
	if c := e.p.Load(); c != nil {
		return c, nil
	}
	return nil, ErrNotStarted
}

// Load is the bound client or nil, for code that runs only after Start
// (workers, background loops).
func (e *Binding[TTx]) Load() *keel.Client[TTx] { return e.p.Load() }

// Register registers the module's collectors with the host's registerer
// (none: nothing to do). Registering a name twice is an error, as it is
// for the registerer.
func (b *Base[TTx]) Register(cs ...prometheus.Collector) error {
	return Register(b.reg, cs...)
}

// Register registers cs with reg (nil: nothing to do).
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("registering metrics: %w", err)
		}
	}
	return nil
}

// Queries loads the module's statements for its database's dialect from
// dir/<dialect>/*.sql of fsys (see keelsql/sqlfile), returning an error for
// a dialect without statements or a bad file.
func (b *Base[TTx]) Queries(fsys fs.FS, dir string) (sqlfile.Set, error) {
	return LoadQueries(fsys, dir, b.DB.Dialect())
}

// LoadQueries loads dir/<dialect>/*.sql of fsys.
func LoadQueries(fsys fs.FS, dir, dialect string) (sqlfile.Set, error) {
	sub := path.Join(dir, dialect)
	if _, err := fs.Stat(fsys, sub); err != nil {
		return nil, fmt.Errorf("loading queries: no statements for dialect %q", dialect)
	}
	set, err := sqlfile.Load(fsys, sub)
	if err != nil {
		return nil, fmt.Errorf("loading queries: %w", err)
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("loading queries: %s holds no statements", sub)
	}
	return set, nil
}

// Stop stops the module's lifecycle (a module's Stop that has nothing
// else to end).
func (b *Base[TTx]) Stop(ctx context.Context) error { return b.Life.Stop(ctx) }
