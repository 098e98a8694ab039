// Package keelmigrate applies Keel's embedded, numbered SQL migrations.
//
// Migrations come in lines. The engine line ("engine") holds the engine's own
// schema and comes from Driver.Migrations(); every business module adds a
// line of its own with an fs.FS for the driver's dialect. Each line is
// numbered independently, and the bookkeeping table keel_migration records
// (line, version, name, applied_at) for every applied migration. The
// engine's migration 001 creates that table itself, so a brand-new database
// needs nothing but Up.
//
// Files sit at the root of a line's FS and are named NNN_name.up.sql and
// NNN_name.down.sql (NNN a positive integer with any zero padding). Gaps
// between versions are allowed; a version may appear only once. A missing
// down file makes a migration irreversible.
//
// Every migration runs in its own transaction together with its bookkeeping
// row, so a failing migration leaves no trace and a crash between two
// migrations leaves a consistent state. Concurrent migrators (several
// instances starting at once) are serialized per migration; see lockStatements.
package keelmigrate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// EngineLine is the name of the engine's own migration line. It is always
// present, always first, and cannot be used by a module.
const EngineLine = "engine"

// migrationTable is the bookkeeping table created by the engine's migration 001.
const migrationTable = "keel_migration"

// lockStatements maps a dialect to a statement that, run first inside a
// migration transaction, serializes all migrators of the database until the
// transaction ends. After taking it the migrator re-reads keel_migration, so
// two processes running Up at once never apply the same migration twice: the
// second waits, then sees the row the first committed and skips.
//
// Why a dialect switch here, when the engine otherwise never switches on
// dialects: the lock is not an engine operation but part of running the
// dialect-specific migration files, which are already chosen by dialect
// (Driver.Dialect's documented purpose). Adding a capability method to
// keeldriver.Driver for the single caller would widen the storage seam that
// every driver must implement. A dialect absent from this map needs no
// statement:
//
//   - postgres: a transaction-scoped advisory lock, released by commit or
//     rollback, so a crashed migrator can never leave it held. Plain
//     transactions are not enough on PostgreSQL: two READ COMMITTED
//     transactions can both see version N as pending and both run it.
//     The second statement matters too: taking an advisory lock does not
//     make the backend process catalog invalidations, so a negative catalog
//     cache entry ("keel_migration does not exist", cached when this
//     connection looked before the other migrator's commit) would survive
//     the wait and TableExists (to_regclass) would still say false. Opening
//     a catalog relation takes a relation lock, which processes pending
//     invalidations. In the simple protocol each statement is analyzed only
//     after the previous one has run, i.e. after the advisory lock is held.
//   - sqlite: a database has a single writer, and keelsqlite begins write
//     transactions IMMEDIATE, so the write lock is held from Begin to commit.
//     A second migrator waits for it (busy timeout) and then sees the
//     committed row when it re-reads; at worst it fails with SQLITE_BUSY
//     having changed nothing. It never applies a migration twice.
var lockStatements = map[string]string{
	"postgres": "SELECT pg_advisory_xact_lock(hashtext('keel_migrate'));\n" +
		"SELECT 1 FROM pg_catalog.pg_class WHERE false;",
}

// ErrEngineBase is returned by Down when it would revert the engine's
// version 1, which drops every job; DownOpts.All confirms that intent.
var ErrEngineBase = errors.New("keelmigrate: refusing to revert the engine line below version 1 (it drops every job table); set All to confirm")

// Line is one migration line of a business module.
type Line struct {
	// Name identifies the line in keel_migration: lowercase letters, digits,
	// '_', '-', '.'; at most 63 characters; not "engine".
	Name string
	// FS holds the line's migration files, for the driver's dialect, at its
	// root (use fs.Sub for an embedded directory).
	FS fs.FS
}

// Config configures a Migrator.
type Config struct {
	// Lines are the module lines, applied in this order after the engine
	// line, which is implicit and always first.
	Lines []Line
	// Logger receives one record per applied or reverted migration; nil
	// discards.
	Logger *slog.Logger
}

// Direction says which way a migration ran.
type Direction string

const (
	DirectionUp   Direction = "up"
	DirectionDown Direction = "down"
)

// Migration is one numbered migration of a line, as found in its files.
type Migration struct {
	Line    string
	Version int
	Name    string
	// UpFile and DownFile are the file names within the line's FS; DownFile
	// is empty for an irreversible migration.
	UpFile   string
	DownFile string

	upSQL, downSQL string
}

// UpSQL returns the text of the up file.
func (m Migration) UpSQL() string { return m.upSQL }

// DownSQL returns the text of the down file ("" when irreversible).
func (m Migration) DownSQL() string { return m.downSQL }

// String is "line/NNN_name".
func (m Migration) String() string { return fmt.Sprintf("%s/%03d_%s", m.Line, m.Version, m.Name) }

// UpOpts selects what Up applies.
type UpOpts struct {
	// Line restricts Up to one line; "" applies every line, engine first.
	Line string
	// TargetVersion stops after this version of Line (which it requires);
	// 0 applies everything pending.
	TargetVersion int
	// OnProgress, if set, is called after each planned migration finishes
	// (applied, or found already applied by a concurrent migrator): done
	// counts finished migrations, total is the size of the plan, and current
	// is the migration that just finished.
	OnProgress func(done, total int, current Migration)
}

// DownOpts selects what Down reverts. Steps, TargetVersion and All are
// mutually exclusive; with none set one migration is reverted.
type DownOpts struct {
	// Line is required.
	Line string
	// Steps is how many applied migrations to revert, newest first (default 1).
	Steps int
	// TargetVersion reverts every applied migration above this version,
	// which must be one of the line's versions.
	TargetVersion int
	// All reverts every applied migration of the line. It is also the only
	// way to revert the engine's version 1.
	All bool
	// OnProgress works as in UpOpts.
	OnProgress func(done, total int, current Migration)
}

// Result reports what Up or Down did. On error it still lists the
// migrations that had completed before the failing one.
type Result struct {
	Direction Direction
	// Migrations were applied (Up) or reverted (Down) by this call, in order.
	Migrations []Migration
	// Skipped were planned but found already applied (Up) or already
	// reverted (Down) by a concurrent migrator once the lock was held.
	Skipped  []Migration
	Duration time.Duration
}

// AppliedMigration is a migration found in both the files and keel_migration.
type AppliedMigration struct {
	Migration
	AppliedAt time.Time
}

// LineStatus is one line's state in the database.
type LineStatus struct {
	Line string
	// Configured is false for a line found only in keel_migration (a module
	// this binary does not know); all its rows are then Unknown.
	Configured bool
	// Current is the highest applied version (0 when none).
	Current int
	// Applied migrations, ascending.
	Applied []AppliedMigration
	// Pending migrations (in the files, not applied), ascending. A pending
	// version below Current is a gap filled later (e.g. from a merged branch).
	Pending []Migration
	// Unknown rows are applied in the database but have no file: the
	// database was migrated by a newer binary, or a file was removed.
	Unknown []keeldriver.MigrationRow
}

// PendingError is returned by Validate when migrations are pending.
type PendingError struct {
	Pending []Migration
}

func (e *PendingError) Error() string {
	names := make([]string, len(e.Pending))
	for i, m := range e.Pending {
		names[i] = m.String()
	}
	return fmt.Sprintf("keelmigrate: %d pending migration(s): %s (run migrations up)", len(e.Pending), strings.Join(names, ", "))
}

// MigrationError is a migration that failed; its transaction was rolled back.
type MigrationError struct {
	Migration Migration
	Direction Direction
	// File is the file that failed (the up or down file).
	File string
	Err  error
}

func (e *MigrationError) Error() string {
	return fmt.Sprintf("keelmigrate: line %q: migration %s (%s) failed, rolled back: %v",
		e.Migration.Line, e.File, e.Direction, e.Err)
}

func (e *MigrationError) Unwrap() error { return e.Err }

type lineFiles struct {
	name       string
	migrations []*Migration // ascending
	byVersion  map[int]*Migration
}

// Migrator applies and reverts migrations through a driver.
type Migrator[TTx any] struct {
	driver  keeldriver.Driver[TTx]
	lines   []*lineFiles // engine first, then Config.Lines order
	byName  map[string]*lineFiles
	logger  *slog.Logger
	lockSQL string
}

// New parses and validates every line's files. It touches no database. An
// error names each offending line and file.
func New[TTx any](driver keeldriver.Driver[TTx], cfg *Config) (*Migrator[TTx], error) {
	if driver == nil {
		return nil, fmt.Errorf("keelmigrate: driver is nil: %w", keeltype.ErrInvalidArgument)
	}
	if cfg == nil {
		cfg = &Config{}
	}
	m := &Migrator[TTx]{
		driver:  driver,
		byName:  map[string]*lineFiles{},
		logger:  cfg.Logger,
		lockSQL: lockStatements[driver.Dialect()],
	}
	if m.logger == nil {
		m.logger = slog.New(slog.DiscardHandler)
	}

	var errs []error
	add := func(name string, fsys fs.FS) {
		migs, err := parseLine(name, fsys)
		if err != nil {
			errs = append(errs, err)
			return
		}
		lf := &lineFiles{name: name, migrations: migs, byVersion: map[int]*Migration{}}
		for _, mig := range migs {
			lf.byVersion[mig.Version] = mig
		}
		m.lines = append(m.lines, lf)
		m.byName[name] = lf
	}
	add(EngineLine, driver.Migrations())
	seen := map[string]bool{EngineLine: true}
	for i, l := range cfg.Lines {
		switch {
		case l.Name == EngineLine:
			errs = append(errs, fmt.Errorf("keelmigrate: line %d: name %q is reserved for the engine", i, l.Name))
		case !lineNameRE.MatchString(l.Name):
			errs = append(errs, fmt.Errorf("keelmigrate: line %d: bad line name %q: want lowercase letters, digits, '_', '-' or '.', starting with a letter, at most 63 characters", i, l.Name))
		case seen[l.Name]:
			errs = append(errs, fmt.Errorf("keelmigrate: line %q is configured twice", l.Name))
		default:
			seen[l.Name] = true
			add(l.Name, l.FS)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(m.byName[EngineLine].migrations) == 0 {
		return nil, fmt.Errorf("keelmigrate: driver %q supplies no engine migrations", driver.Dialect())
	}
	return m, nil
}

// Migrations returns the parsed migrations of a line, ascending, or nil for
// an unknown line.
func (m *Migrator[TTx]) Migrations(line string) []Migration {
	lf := m.byName[line]
	if lf == nil {
		return nil
	}
	out := make([]Migration, len(lf.migrations))
	for i, mig := range lf.migrations {
		out[i] = *mig
	}
	return out
}

// Lines returns the configured line names, engine first.
func (m *Migrator[TTx]) Lines() []string {
	out := make([]string, len(m.lines))
	for i, lf := range m.lines {
		out[i] = lf.name
	}
	return out
}

// appliedRows reads keel_migration, grouped by line and version. Before the
// engine's migration 001 has run the table does not exist and nothing is
// applied.
func appliedRows(ctx context.Context, ex keeldriver.Executor) (map[string]map[int]*keeldriver.MigrationRow, bool, error) {
	out := map[string]map[int]*keeldriver.MigrationRow{}
	exists, err := ex.TableExists(ctx, migrationTable)
	if err != nil {
		return nil, false, fmt.Errorf("keelmigrate: checking for %s: %w", migrationTable, err)
	}
	if !exists {
		return out, false, nil
	}
	rows, err := ex.MigrationApplied(ctx)
	if err != nil {
		return nil, true, fmt.Errorf("keelmigrate: reading %s: %w", migrationTable, err)
	}
	for _, r := range rows {
		if out[r.Line] == nil {
			out[r.Line] = map[int]*keeldriver.MigrationRow{}
		}
		out[r.Line][r.Version] = r
	}
	return out, true, nil
}

// Up applies pending migrations, each in its own transaction with its
// bookkeeping row. It stops at the first failure, which is a
// *MigrationError naming the file.
func (m *Migrator[TTx]) Up(ctx context.Context, opts *UpOpts) (*Result, error) {
	if opts == nil {
		opts = &UpOpts{}
	}
	lines := m.lines
	if opts.Line != "" {
		lf := m.byName[opts.Line]
		if lf == nil {
			return nil, m.unknownLine(opts.Line)
		}
		lines = []*lineFiles{lf}
	}
	if opts.TargetVersion < 0 {
		return nil, fmt.Errorf("keelmigrate: negative target version %d: %w", opts.TargetVersion, keeltype.ErrInvalidArgument)
	}
	if opts.TargetVersion > 0 {
		if opts.Line == "" {
			return nil, fmt.Errorf("keelmigrate: a target version needs a line: %w", keeltype.ErrInvalidArgument)
		}
		if lines[0].byVersion[opts.TargetVersion] == nil {
			return nil, fmt.Errorf("keelmigrate: line %q has no version %d: %w", opts.Line, opts.TargetVersion, keeltype.ErrInvalidArgument)
		}
	}

	applied, exists, err := appliedRows(ctx, m.driver.Executor())
	if err != nil {
		return nil, err
	}
	if !exists && lines[0].name != EngineLine {
		return nil, fmt.Errorf("keelmigrate: line %q cannot be applied before the engine line (the database has no %s table): run Up for every line or for %q first",
			lines[0].name, migrationTable, EngineLine)
	}
	var plan []*Migration
	for _, lf := range lines {
		for _, mig := range lf.migrations {
			if opts.TargetVersion > 0 && mig.Version > opts.TargetVersion {
				break
			}
			if applied[lf.name][mig.Version] == nil {
				plan = append(plan, mig)
			}
		}
	}
	return m.run(ctx, DirectionUp, plan, opts.OnProgress)
}

// Down reverts applied migrations of one line, newest first, each in its own
// transaction. Everything is checked before anything runs: an applied
// version without a file, or without a down file, fails the whole call.
func (m *Migrator[TTx]) Down(ctx context.Context, opts *DownOpts) (*Result, error) {
	if opts == nil || opts.Line == "" {
		return nil, fmt.Errorf("keelmigrate: down needs a line: %w", keeltype.ErrInvalidArgument)
	}
	lf := m.byName[opts.Line]
	if lf == nil {
		return nil, m.unknownLine(opts.Line)
	}
	set := 0
	for _, b := range []bool{opts.Steps != 0, opts.TargetVersion != 0, opts.All} {
		if b {
			set++
		}
	}
	switch {
	case opts.Steps < 0 || opts.TargetVersion < 0:
		return nil, fmt.Errorf("keelmigrate: negative steps or target version: %w", keeltype.ErrInvalidArgument)
	case set > 1:
		return nil, fmt.Errorf("keelmigrate: set only one of Steps, TargetVersion and All: %w", keeltype.ErrInvalidArgument)
	case opts.TargetVersion > 0 && lf.byVersion[opts.TargetVersion] == nil:
		return nil, fmt.Errorf("keelmigrate: line %q has no version %d: %w", opts.Line, opts.TargetVersion, keeltype.ErrInvalidArgument)
	}

	appliedAll, _, err := appliedRows(ctx, m.driver.Executor())
	if err != nil {
		return nil, err
	}
	versions := make([]int, 0, len(appliedAll[lf.name]))
	for v := range appliedAll[lf.name] {
		versions = append(versions, v)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(versions)))

	var chosen []int
	switch {
	case opts.All:
		chosen = versions
	case opts.TargetVersion > 0:
		for _, v := range versions {
			if v > opts.TargetVersion {
				chosen = append(chosen, v)
			}
		}
	default:
		steps := max(opts.Steps, 1)
		chosen = versions[:min(steps, len(versions))]
	}

	plan := make([]*Migration, 0, len(chosen))
	for _, v := range chosen {
		if lf.name == EngineLine && v <= 1 && !opts.All {
			return nil, ErrEngineBase
		}
		mig := lf.byVersion[v]
		if mig == nil {
			row := appliedAll[lf.name][v]
			return nil, fmt.Errorf("keelmigrate: line %q: version %d (%s) is applied but has no migration file, so it cannot be reverted by this binary", lf.name, v, row.Name)
		}
		if mig.DownFile == "" {
			return nil, fmt.Errorf("keelmigrate: line %q: %s has no down file: the migration is irreversible", lf.name, mig.UpFile)
		}
		plan = append(plan, mig)
	}
	return m.run(ctx, DirectionDown, plan, opts.OnProgress)
}

func (m *Migrator[TTx]) run(ctx context.Context, dir Direction, plan []*Migration, progress func(int, int, Migration)) (*Result, error) {
	start := time.Now()
	res := &Result{Direction: dir}
	for i, mig := range plan {
		t0 := time.Now()
		done, err := m.runOne(ctx, dir, mig)
		if err != nil {
			res.Duration = time.Since(start)
			return res, err
		}
		if done {
			res.Migrations = append(res.Migrations, *mig)
			m.logger.InfoContext(ctx, "keel migration "+string(dir),
				"line", mig.Line, "version", mig.Version, "name", mig.Name, "duration", time.Since(t0))
		} else {
			res.Skipped = append(res.Skipped, *mig)
			m.logger.InfoContext(ctx, "keel migration already "+map[Direction]string{DirectionUp: "applied", DirectionDown: "reverted"}[dir]+" by another migrator",
				"line", mig.Line, "version", mig.Version, "name", mig.Name)
		}
		if progress != nil {
			progress(i+1, len(plan), *mig)
		}
	}
	res.Duration = time.Since(start)
	return res, nil
}

// runOne runs one migration in its own transaction: lock, re-check, run the
// file, write or delete the bookkeeping row, commit. It reports false when a
// concurrent migrator had already done the work.
func (m *Migrator[TTx]) runOne(ctx context.Context, dir Direction, mig *Migration) (bool, error) {
	done, err := m.runOneTx(ctx, dir, mig)
	if err == nil {
		return done, nil
	}
	// Last line of defence, should a dialect's lock ever be weaker than
	// documented: the primary key of keel_migration makes a second
	// application fail (at the latest when recording it), and its
	// transaction rolled back. If, seen afresh, another migrator has reached
	// the state this one wanted, that failure was the race and not the file.
	if applied, _, cerr := appliedRows(ctx, m.driver.Executor()); cerr == nil {
		if (applied[mig.Line][mig.Version] != nil) == (dir == DirectionUp) {
			m.logger.WarnContext(ctx, "keel migration failed but another migrator completed it concurrently",
				"line", mig.Line, "version", mig.Version, "name", mig.Name, "error", err)
			return false, nil
		}
	}
	return false, err
}

func (m *Migrator[TTx]) runOneTx(ctx context.Context, dir Direction, mig *Migration) (bool, error) {
	file, sql := mig.UpFile, mig.upSQL
	if dir == DirectionDown {
		file, sql = mig.DownFile, mig.downSQL
	}
	fail := func(err error) error {
		return &MigrationError{Migration: *mig, Direction: dir, File: file, Err: err}
	}

	tx, err := m.driver.Executor().Begin(ctx)
	if err != nil {
		return false, fail(fmt.Errorf("begin: %w", err))
	}
	committed := false
	defer func() {
		if !committed {
			// Rolls back even when ctx is cancelled.
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()

	if m.lockSQL != "" {
		if err := tx.Exec(ctx, m.lockSQL); err != nil {
			return false, fail(fmt.Errorf("taking the migration lock: %w", err))
		}
	}
	applied, _, err := appliedRows(ctx, tx)
	if err != nil {
		return false, fail(err)
	}
	isApplied := applied[mig.Line][mig.Version] != nil
	if isApplied != (dir == DirectionDown) {
		return false, nil // a concurrent migrator got there first
	}

	if dir == DirectionUp {
		if err := tx.Exec(ctx, sql); err != nil {
			return false, fail(err)
		}
		row := &keeldriver.MigrationRow{Line: mig.Line, Version: mig.Version, Name: mig.Name, AppliedAt: time.Now().UTC()}
		if err := tx.MigrationRecord(ctx, row); err != nil {
			return false, fail(fmt.Errorf("recording in %s: %w", migrationTable, err))
		}
	} else {
		// Forget first: a down file may drop the bookkeeping table itself
		// (the engine's version 1 may), and the transaction makes the order
		// invisible to everyone else.
		if err := tx.MigrationForget(ctx, mig.Line, mig.Version); err != nil {
			return false, fail(fmt.Errorf("removing from %s: %w", migrationTable, err))
		}
		if strings.TrimSpace(sql) != "" {
			if err := tx.Exec(ctx, sql); err != nil {
				return false, fail(err)
			}
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fail(fmt.Errorf("commit: %w", err))
	}
	committed = true
	return true, nil
}

// Status reports every configured line (engine first), followed by lines
// found only in keel_migration.
func (m *Migrator[TTx]) Status(ctx context.Context) ([]LineStatus, error) {
	applied, _, err := appliedRows(ctx, m.driver.Executor())
	if err != nil {
		return nil, err
	}
	out := make([]LineStatus, 0, len(m.lines))
	for _, lf := range m.lines {
		st := LineStatus{Line: lf.name, Configured: true}
		rows := applied[lf.name]
		for _, mig := range lf.migrations {
			if r := rows[mig.Version]; r != nil {
				st.Applied = append(st.Applied, AppliedMigration{Migration: *mig, AppliedAt: r.AppliedAt})
			} else {
				st.Pending = append(st.Pending, *mig)
			}
		}
		for v, r := range rows {
			st.Current = max(st.Current, v)
			if lf.byVersion[v] == nil {
				st.Unknown = append(st.Unknown, *r)
			}
		}
		sortRows(st.Unknown)
		out = append(out, st)
	}
	var extra []string
	for line := range applied {
		if m.byName[line] == nil {
			extra = append(extra, line)
		}
	}
	sort.Strings(extra)
	for _, line := range extra {
		st := LineStatus{Line: line}
		for v, r := range applied[line] {
			st.Current = max(st.Current, v)
			st.Unknown = append(st.Unknown, *r)
		}
		sortRows(st.Unknown)
		out = append(out, st)
	}
	return out, nil
}

func sortRows(rows []keeldriver.MigrationRow) {
	slices.SortFunc(rows, func(a, b keeldriver.MigrationRow) int { return a.Version - b.Version })
}

// Validate returns a *PendingError listing every pending migration, for a
// startup check that refuses to run on an outdated schema. Applied versions
// unknown to this binary (a newer deployment migrated first) are logged as
// warnings but are not an error, so that rolling deploys work.
func (m *Migrator[TTx]) Validate(ctx context.Context) error {
	status, err := m.Status(ctx)
	if err != nil {
		return err
	}
	var pending []Migration
	for _, st := range status {
		pending = append(pending, st.Pending...)
		for _, r := range st.Unknown {
			if st.Configured {
				m.logger.WarnContext(ctx, "keel migration applied in the database but unknown to this binary",
					"line", r.Line, "version", r.Version, "name", r.Name)
			}
		}
	}
	if len(pending) > 0 {
		return &PendingError{Pending: pending}
	}
	return nil
}

func (m *Migrator[TTx]) unknownLine(line string) error {
	return fmt.Errorf("keelmigrate: unknown line %q (configured: %s): %w",
		line, strings.Join(m.Lines(), ", "), keeltype.ErrInvalidArgument)
}
