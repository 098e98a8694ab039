// Package testdb gives tests a fresh, migrated database of each kind:
// PostgreSQL in a random schema that is dropped afterwards, SQLite in a file
// under t.TempDir(). Every test in the repository gets its databases here.
//
// PostgreSQL is required: the repository's test command provides one, so an
// unreachable server fails the test (with how to fix it) rather than
// skipping, except under -short, where PostgreSQL tests are skipped.
//
// Packages whose own tests use testdb (keelpgx, keelsqlite, keelmigrate) must
// write them as external test packages (package keelpgx_test), since testdb
// imports them.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsqlite"
)

// EnvURL names the environment variable holding the PostgreSQL URL.
const EnvURL = "KEEL_TEST_DATABASE_URL"

// DefaultURL is used when EnvURL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// SchemaPrefix starts the name of every schema NewPostgres creates, so that
// schemas leaked by killed test processes are easy to find and drop.
const SchemaPrefix = "keel_t_"

// setupTimeout bounds connecting, creating and migrating a test database.
const setupTimeout = 60 * time.Second

// reachable caches, per URL, the result of the first connection attempt, so
// that a missing server costs one timeout per test binary, not one per test.
var reachable sync.Map // url -> *probe

type probe struct {
	once sync.Once
	err  error
}

// PostgresURL returns the URL of the test server (EnvURL, or DefaultURL),
// after checking once per test binary that it accepts connections. If it does
// not, the test fails with instructions, or is skipped under -short.
func PostgresURL(t testing.TB) string {
	t.Helper()
	skipPostgresInSQLiteStep(t)
	u := os.Getenv(EnvURL)
	if u == "" {
		u = DefaultURL
	}
	p, _ := reachable.LoadOrStore(u, &probe{})
	pr := p.(*probe)
	pr.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, keelsql.SingleConnURL(u))
		if err != nil {
			pr.err = err
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		pr.err = conn.Ping(ctx)
	})
	if pr.err != nil {
		if testing.Short() {
			t.Skipf("testdb: PostgreSQL unreachable at %s (skipped under -short): %v", redact(u), pr.err)
		}
		t.Fatalf("testdb: PostgreSQL is required but unreachable at %s: %v\n"+
			"Start it (the test scripts do), set %s to a reachable server, or run with -short to skip PostgreSQL tests.",
			redact(u), pr.err, EnvURL)
	}
	return u
}

// TestPoolConns caps the pool of a driver a test opens in process
// (OpenPostgres, PoolURL). A driver's default pool is 20 connections
// (keelpgx.DefaultMaxConns), opened as demand comes; two packages' tests
// run side by side, each with its parallel tests and the drivers of
// several instances, against one PostgreSQL whose default
// max_connections is 100. Uncapped, the reservation and delivery tests
// together held all 100 (64 and 36), and whatever connected next was
// refused ("too many clients"). 8 is more than any test's concurrency
// needs: a pool this size queues a burst, it does not fail it.
const TestPoolConns = 8

// PoolURL is PostgresURL with the pool capped at TestPoolConns, unless the
// URL already sizes it: for a test that opens another driver in process.
func PoolURL(t testing.TB) string {
	t.Helper()
	u := PostgresURL(t)
	if strings.Contains(u, "pool_max_conns") {
		return u
	}
	return withPoolMax(u, TestPoolConns)
}

// withPoolMax appends pool_max_conns to a URL or keyword/value string.
func withPoolMax(u string, n int) string {
	if !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
		return fmt.Sprintf("%s pool_max_conns=%d", u, n)
	}
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return fmt.Sprintf("%s%spool_max_conns=%d", u, sep, n)
}

// ServeURL is PostgresSchemaURL for a Keel server a test starts (in
// process or as the binary): its pool is capped at 8 connections. A
// server's default pool is 20 and the package's tests run in parallel,
// beside other packages, against one PostgreSQL whose default
// max_connections is 100: two servers with every module held 43.
func ServeURL(t testing.TB, schema string) string {
	t.Helper()
	return withPoolMax(PostgresSchemaURL(t, schema), 8)
}

// PostgresSchemaURL returns the test server's URL with search_path set to
// schema as a connection runtime parameter, for child processes (crash
// tests) that must open the same schema as their parent.
func PostgresSchemaURL(t testing.TB, schema string) string {
	t.Helper()
	return withSearchPath(t, PostgresURL(t), schema)
}

func withSearchPath(t testing.TB, base, schema string) string {
	t.Helper()
	if strings.HasPrefix(base, "postgres://") || strings.HasPrefix(base, "postgresql://") {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatalf("testdb: parsing %s: %v", EnvURL, err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	// keyword/value form: host=... user=...
	return base + " search_path=" + schema
}

// Options adjusts OpenPostgres and OpenSQLite.
type Options struct {
	// Bare skips migrations: the database is empty (for migration tests).
	Bare bool
	// Lines, if set, returns module lines to migrate after the engine line
	// for the given dialect ("postgres" or "sqlite").
	Lines func(dialect string) []keelmigrate.Line
}

// NewPostgres returns a driver on a fresh schema with the engine migrated.
// The schema is dropped (CASCADE) and the driver closed when t ends.
func NewPostgres(t testing.TB) *keelpgx.Driver {
	t.Helper()
	d, _ := OpenPostgres(t, nil)
	return d
}

// NewSQLite returns a driver on a fresh database file under t.TempDir() with
// the engine migrated. The driver is closed when t ends.
func NewSQLite(t testing.TB) *keelsqlite.Driver {
	t.Helper()
	d, _ := OpenSQLite(t, nil)
	return d
}

// OpenPostgres is NewPostgres with options; it also returns the schema name
// (see PostgresSchemaURL).
func OpenPostgres(t testing.TB, opts *Options) (*keelpgx.Driver, string) {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	base := PostgresURL(t)
	schema := SchemaPrefix + randomHex(t, 8)
	ident := pgx.Identifier{schema}.Sanitize()

	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	sweepOnce.Do(func() { sweep(ctx, t, base) })
	// The comment dates the schema for sweep, in case this process is
	// killed before its cleanup runs.
	if err := adminExec(ctx, base, "CREATE SCHEMA "+ident+"; COMMENT ON SCHEMA "+ident+" IS '"+
		commentPrefix+time.Now().UTC().Format(time.RFC3339)+"'"); err != nil {
		t.Fatalf("testdb: creating schema %s: %v", schema, err)
	}
	// Registered before the driver's Close, so it runs after it.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := adminExec(ctx, base, "DROP SCHEMA IF EXISTS "+ident+" CASCADE"); err != nil {
			t.Errorf("testdb: dropping schema %s: %v", schema, err)
		}
	})

	// The driver's pool outlives this function: do not hand it ctx, which
	// is cancelled on return.
	d, err := keelpgx.Open(context.Background(), PoolURL(t), &keelpgx.Config{Schema: schema})
	if err != nil {
		t.Fatalf("testdb: opening keelpgx on schema %s: %v", schema, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if !opts.Bare {
		migrate(ctx, t, d, opts)
	}
	return d, schema
}

// OpenSQLite is NewSQLite with options; it also returns the database path
// (for child processes in crash tests).
func OpenSQLite(t testing.TB, opts *Options) (*keelsqlite.Driver, string) {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	path := filepath.Join(t.TempDir(), "keel.db")
	if !opts.Bare {
		ctx, cancel := context.WithTimeout(context.Background(), templateBuildTimeout)
		defer cancel()
		if err := migratedSQLite(ctx, t, path, opts); err != nil {
			t.Fatalf("testdb: %v", err)
		}
	}
	d, err := keelsqlite.Open(path, nil)
	if err != nil {
		t.Fatalf("testdb: opening keelsqlite at %s: %v", path, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, path
}

// NewPostgresBare returns a driver on a fresh, empty (unmigrated) schema.
func NewPostgresBare(t testing.TB) *keelpgx.Driver {
	t.Helper()
	d, _ := OpenPostgres(t, &Options{Bare: true})
	return d
}

// NewSQLiteBare returns a driver on a fresh, empty (unmigrated) file.
func NewSQLiteBare(t testing.TB) *keelsqlite.Driver {
	t.Helper()
	d, _ := OpenSQLite(t, &Options{Bare: true})
	return d
}

func migrate[TTx any](ctx context.Context, t testing.TB, d keeldriver.Driver[TTx], opts *Options) {
	t.Helper()
	cfg := &keelmigrate.Config{}
	if opts.Lines != nil {
		cfg.Lines = opts.Lines(d.Dialect())
	}
	m, err := keelmigrate.New(d, cfg)
	if err != nil {
		t.Fatalf("testdb: loading %s migrations: %v", d.Dialect(), err)
	}
	if _, err := m.Up(ctx, nil); err != nil {
		t.Fatalf("testdb: migrating %s: %v", d.Dialect(), err)
	}
}

const commentPrefix = "keel test schema, created "

// staleAfter is the age past which a test schema is certainly leaked (its
// test process was killed); no test runs that long.
const staleAfter = 3 * time.Hour

var sweepOnce sync.Once

// sweep drops test schemas leaked by killed test processes: only those
// carrying testdb's creation comment, and only when older than staleAfter,
// so schemas of test processes running right now are never touched.
func sweep(ctx context.Context, t testing.TB, u string) {
	conn, err := pgx.Connect(ctx, keelsql.SingleConnURL(u))
	if err != nil {
		return // PostgresURL already reported reachability
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT nspname, coalesce(obj_description(oid, 'pg_namespace'), '')
		FROM pg_namespace WHERE starts_with(nspname, $1)`, SchemaPrefix)
	if err != nil {
		t.Logf("testdb: listing leaked schemas: %v", err)
		return
	}
	var stale []string
	for rows.Next() {
		var name, comment string
		if err := rows.Scan(&name, &comment); err != nil {
			break
		}
		at, ok := strings.CutPrefix(comment, commentPrefix)
		if !ok {
			continue
		}
		if created, err := time.Parse(time.RFC3339, at); err == nil && time.Since(created) > staleAfter {
			stale = append(stale, name)
		}
	}
	rows.Close()
	for _, name := range stale {
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Logf("testdb: dropping leaked schema %s: %v", name, err)
		}
	}
}

// adminExec runs statements on their own connection to the base URL (not
// through a driver, whose search_path is the test schema).
func adminExec(ctx context.Context, u, stmt string) error {
	conn, err := pgx.Connect(ctx, keelsql.SingleConnURL(u))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, stmt)
	return err
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("testdb: random: %v", err)
	}
	return hex.EncodeToString(b)
}

// redact hides a password in a URL for messages.
func redact(u string) string {
	if p, err := url.Parse(u); err == nil && p.User != nil {
		if _, ok := p.User.Password(); ok {
			p.User = url.UserPassword(p.User.Username(), "xxxxx")
			return p.String()
		}
	}
	return u
}

// Harness names a driver for table-driven tests over both databases.
type Harness[TTx any] struct {
	Name   string
	Driver keeldriver.Driver[TTx]
}

// PostgresHarness is NewPostgres as a Harness named "postgres".
func PostgresHarness(t testing.TB) Harness[pgx.Tx] {
	t.Helper()
	return Harness[pgx.Tx]{Name: "postgres", Driver: NewPostgres(t)}
}

// SQLiteHarness is NewSQLite as a Harness named "sqlite".
func SQLiteHarness(t testing.TB) Harness[*sql.Tx] {
	t.Helper()
	return Harness[*sql.Tx]{Name: "sqlite", Driver: NewSQLite(t)}
}

// Each runs pg and lite as parallel subtests "postgres" and "sqlite", each on
// its own fresh, migrated database created inside the subtest.
func Each(t *testing.T, pg func(t *testing.T, d *keelpgx.Driver), lite func(t *testing.T, d *keelsqlite.Driver)) {
	t.Helper()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pg(t, NewPostgres(t))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		lite(t, NewSQLite(t))
	})
}

// Run is Each for tests written once, generically over the driver's
// transaction type:
//
//	func testClaim[TTx any](t *testing.T, d keeldriver.Driver[TTx]) { ... }
//	func TestClaim(t *testing.T) { testdb.Run(t, testClaim[pgx.Tx], testClaim[*sql.Tx]) }
func Run(t *testing.T, pg func(*testing.T, keeldriver.Driver[pgx.Tx]), lite func(*testing.T, keeldriver.Driver[*sql.Tx])) {
	t.Helper()
	Each(t,
		func(t *testing.T, d *keelpgx.Driver) { pg(t, d) },
		func(t *testing.T, d *keelsqlite.Driver) { lite(t, d) },
	)
}
