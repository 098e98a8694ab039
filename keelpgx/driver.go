// Package keelpgx is the PostgreSQL driver of Keel: keeldriver.Driver over a
// pgx pool, with LISTEN/NOTIFY for cross-process wake-ups.
//
// Every statement is static SQL in queries/*.sql. Optional filters are
// nullable parameters, never SQL built from input.
package keelpgx

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelsql/sqlfile"
	"github.com/keelwork/keel/keeltype"
)

//go:embed migration/*.sql
var migrationFS embed.FS

//go:embed queries/*.sql
var queryFS embed.FS

// queries is loaded at init: a malformed file is a build defect.
var queries = sqlfile.MustLoad(queryFS, "queries")

// DefaultMaxConns is the number of connections Open uses when the URL sets
// no pool_max_conns: the main pool and the claim pool (see claimPool)
// together.
const DefaultMaxConns = 20

// Config configures the driver. A nil *Config is the zero Config.
type Config struct {
	// Schema holds Keel's tables. "" uses the pool's search_path as is.
	// When set, every connection must have search_path = Schema: Open does
	// that; New checks the caller's pool does.
	Schema string
	// ClaimConns sizes the claim pool (see claimPool): 0 means a quarter of
	// the connections, at least 1 and at most DefaultClaimConns; negative
	// means none, and claims and completions run on the main pool with its
	// plan choices.
	ClaimConns int
}

// DefaultClaimConns caps the claim pool's default size. Claims come from
// one or two fetch loops per queue per client and completions from one
// completer, each statement a few milliseconds, so a few connections serve
// many queues.
const DefaultClaimConns = 8

// Driver implements keeldriver.Driver[pgx.Tx].
type Driver struct {
	pool      *pgxpool.Pool
	claims    *pgxpool.Pool // nil: claims run on pool
	ownsPool  bool
	schema    string
	closed    atomic.Bool
	executor  *executor
	listenCfg *pgx.ConnConfig

	// channelNS namespaces notification channels by schema so that two Keel
	// installs in one database do not wake each other. Resolved once from
	// the database when Config.Schema is empty.
	nsMu      sync.Mutex
	channelNS string
}

var _ keeldriver.Driver[pgx.Tx] = (*Driver)(nil)

// identRE is deliberately stricter than PostgreSQL: a schema name that needs
// no case folding reasoning and fits NAMEDATALEN.
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// New wraps a caller's pool; Close will not close it. With cfg.Schema set,
// the pool's connections must already use it as search_path (set the
// search_path runtime parameter, as Open does).
func New(pool *pgxpool.Pool, cfg *Config) (*Driver, error) {
	if pool == nil {
		return nil, errors.New("keelpgx: nil pool")
	}
	schema, err := schemaOf(cfg)
	if err != nil {
		return nil, err
	}
	connCfg := pool.Config().ConnConfig
	if schema != "" && !searchPathIs(connCfg.RuntimeParams["search_path"], schema) {
		return nil, fmt.Errorf("keelpgx: schema %q configured but the pool's search_path is %q; "+
			"set the search_path runtime parameter or use keelpgx.Open", schema, connCfg.RuntimeParams["search_path"])
	}
	return newDriver(pool, schema, claimConns(cfg, pool.Config().MaxConns))
}

func newDriver(pool *pgxpool.Pool, schema string, claims int32) (*Driver, error) {
	d := &Driver{pool: pool, schema: schema, channelNS: schema, listenCfg: pool.Config().ConnConfig.Copy()}
	if n := claims; n > 0 {
		var err error
		if d.claims, err = claimPool(context.Background(), pool.Config(), n); err != nil {
			return nil, err
		}
	}
	d.executor = &executor{d: d, db: poolDB{d: d}, claim: poolDB{d: d, claims: d.claims != nil}}
	return d, nil
}

// claimPool opens the pool that runs the engine's hottest statements outside
// a transaction (FlowKeysAvailable, JobClaimKeys and the completer's
// JobFinishMany) with plan_cache_mode = force_generic_plan,
// enable_seqscan = off and jit = off.
//
// Why a pool of its own: PostgreSQL re-plans a prepared statement for every
// execution while the plan it makes for the actual parameters looks cheaper
// than its generic plan, and for these statements it always does (the
// generic plan assumes 100-element arrays). Under load that planning was a
// large share of each statement: at 1,000 jobs/s offered a claim took
// 2.8 ms with custom plans, and with 5 million finished rows in the table
// the completer spent 1.9 ms planning each 3.8 ms batch. A generic plan,
// though, is made once, at the first execution, perhaps while the table is
// nearly empty, and kept for the connection's life: one made then joined the
// claimed ids by a sequential scan, which cost 1.2 ms per claim once the
// table had grown. The statements are written to be served by their indexes
// whatever the data (Keel needs no table statistics, see migration 3), so
// forbidding sequential scans only takes that wrong turn away; with both
// settings a claim costs 0.16 ms of server time under that load. Other
// statements keep the planner's usual choices: list queries with optional
// filters depend on custom plans, and these settings are per session, so
// they cannot be given to one statement on a shared connection.
//
// Why no JIT: with table statistics the planner sizes a claim's LIMIT per
// key at a tenth of the backlog, so over a large backlog the claim's
// estimated cost passes jit_above_cost (100,000) and PostgreSQL compiles
// its expressions (84 functions) at every execution, though the statement
// touches a few hundred rows. With 10,000,000 finished rows and a 100,000
// job backlog, analyzed, claims took 88 ms each and the drain ran at
// 10,500-13,400 jobs/s against 36,600-38,800 with an empty table (the
// figures in docs/benchmarks.md). Compiling never pays for statements of a
// few milliseconds.
func claimPool(ctx context.Context, main *pgxpool.Config, n int32) (*pgxpool.Pool, error) {
	cfg := main.Copy()
	cfg.MaxConns = n
	cfg.MinConns = 0
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	cfg.ConnConfig.RuntimeParams["enable_seqscan"] = "off"
	cfg.ConnConfig.RuntimeParams["jit"] = "off"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: creating claim pool: %w", err)
	}
	return pool, nil
}

// claimConns is the claim pool's size for a main pool of maxConns.
func claimConns(cfg *Config, maxConns int32) int32 {
	if cfg != nil && cfg.ClaimConns != 0 {
		return int32(max(cfg.ClaimConns, 0))
	}
	return min(DefaultClaimConns, max(1, maxConns/4))
}

// Open creates a pool for url (max conns from pool_max_conns, else
// DefaultMaxConns), pinned to cfg.Schema when set, and a driver that owns
// it: Close closes the pool.
func Open(ctx context.Context, url string, cfg *Config) (*Driver, error) {
	schema, err := schemaOf(cfg)
	if err != nil {
		return nil, err
	}
	poolCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: parsing database url: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		poolCfg.MaxConns = DefaultMaxConns
	}
	// The claim pool's connections count against the configured total.
	claims := min(claimConns(cfg, poolCfg.MaxConns), poolCfg.MaxConns-1)
	poolCfg.MaxConns -= max(claims, 0)
	if schema != "" {
		poolCfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	}
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: creating pool: %w", err)
	}
	d, err := newDriver(pool, schema, claims)
	if err != nil {
		pool.Close()
		return nil, err
	}
	d.ownsPool = true
	return d, nil
}

func schemaOf(cfg *Config) (string, error) {
	if cfg == nil || cfg.Schema == "" {
		return "", nil
	}
	if !identRE.MatchString(cfg.Schema) {
		return "", fmt.Errorf("keelpgx: schema %q is not a valid identifier: %w", cfg.Schema, keeltype.ErrInvalidArgument)
	}
	return cfg.Schema, nil
}

// searchPathIs accepts the schema bare or quoted, as users write either.
func searchPathIs(path, schema string) bool {
	path = strings.TrimSpace(path)
	return path == schema || path == pgx.Identifier{schema}.Sanitize()
}

// Pool returns the driver's pool.
func (d *Driver) Pool() *pgxpool.Pool { return d.pool }

// Executor runs each call on the pool.
func (d *Driver) Executor() keeldriver.Executor { return d.executor }

// UnwrapExecutor runs engine statements in the caller's transaction. The
// caller owns it: Commit and Rollback are no-ops; Begin opens a savepoint.
func (d *Driver) UnwrapExecutor(tx pgx.Tx) keeldriver.ExecutorTx {
	return &executorTx{executor: executor{d: d, db: tx, claim: tx}, tx: tx}
}

// UnwrapTx returns the pgx.Tx behind an ExecutorTx from this driver. Any
// other ExecutorTx is a programming error.
func (d *Driver) UnwrapTx(tx keeldriver.ExecutorTx) pgx.Tx {
	etx, ok := tx.(*executorTx)
	if !ok {
		panic(fmt.Sprintf("keelpgx: UnwrapTx of a %T, not a keelpgx transaction", tx))
	}
	return etx.tx
}

// Dialect is "postgres".
func (d *Driver) Dialect() string { return "postgres" }

// Migrations returns the engine migrations, NNN_name.up.sql/down.sql at the root.
func (d *Driver) Migrations() fs.FS {
	sub, err := fs.Sub(migrationFS, "migration")
	if err != nil {
		panic(err) // a constant, valid path
	}
	return sub
}

// SupportsListener is true: LISTEN/NOTIFY reaches every process.
func (d *Driver) SupportsListener() bool { return true }

// Listener returns an unconnected listener on a dedicated connection.
func (d *Driver) Listener() keeldriver.Listener {
	return &listener{d: d, channels: map[string]string{}}
}

// Notify publishes payload on topic through pg_notify, which is
// transactional only inside a transaction; here it is sent at once.
func (d *Driver) Notify(ctx context.Context, topic, payload string) error {
	if d.closed.Load() {
		return keeldriver.ErrClosed
	}
	channel, err := d.channel(ctx, topic)
	if err != nil {
		return err
	}
	if _, err := d.pool.Exec(ctx, sqlNotify, channel, payload); err != nil {
		return fmt.Errorf("keelpgx: notifying %s: %w", topic, err)
	}
	return nil
}

// Close marks the driver closed and closes the pool if Open created it.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	if d.ownsPool {
		d.pool.Close()
	}
	if d.claims != nil {
		d.claims.Close()
	}
	return nil
}
