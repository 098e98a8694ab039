package keelmigrate_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsqlite"
	"github.com/keelwork/keel/keeltype"
)

// bare runs body against a fresh, unmigrated database of each kind.
func bare(t *testing.T, pg func(*testing.T, keeldriver.Driver[pgx.Tx]), lite func(*testing.T, keeldriver.Driver[*sql.Tx])) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pg(t, testdb.NewPostgresBare(t))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		lite(t, testdb.NewSQLiteBare(t))
	})
}

func mapFS(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for name, body := range files {
		m[name] = &fstest.MapFile{Data: []byte(body)}
	}
	return m
}

func versions(ms []keelmigrate.Migration) []int {
	out := []int{}
	for _, m := range ms {
		out = append(out, m.Version)
	}
	return out
}

func appliedVersions(ms []keelmigrate.AppliedMigration) []int {
	out := []int{}
	for _, m := range ms {
		out = append(out, m.Version)
	}
	return out
}

func lineStatus(t *testing.T, st []keelmigrate.LineStatus, line string) keelmigrate.LineStatus {
	t.Helper()
	for _, s := range st {
		if s.Line == line {
			return s
		}
	}
	t.Fatalf("no status for line %q in %+v", line, st)
	return keelmigrate.LineStatus{}
}

func tableExists(t *testing.T, ex keeldriver.Executor, name string) bool {
	t.Helper()
	ok, err := ex.TableExists(context.Background(), name)
	if err != nil {
		t.Fatalf("TableExists(%s): %v", name, err)
	}
	return ok
}

func TestEngineRoundTrip(t *testing.T) {
	bare(t, testEngineRoundTrip[pgx.Tx], testEngineRoundTrip[*sql.Tx])
}

func testEngineRoundTrip[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	m, err := keelmigrate.New(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	engine := m.Migrations(keelmigrate.EngineLine)
	if len(engine) == 0 || engine[0].Version != 1 {
		t.Fatalf("engine migrations: %+v", engine)
	}

	st, err := m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := lineStatus(t, st, keelmigrate.EngineLine); s.Current != 0 || len(s.Applied) != 0 || !slices.Equal(versions(s.Pending), versions(engine)) {
		t.Fatalf("fresh status: %+v", s)
	}
	var pe *keelmigrate.PendingError
	if err := m.Validate(ctx); !errors.As(err, &pe) || len(pe.Pending) != len(engine) || !strings.Contains(err.Error(), "engine/001_") {
		t.Fatalf("Validate on a fresh database: %v", err)
	}

	var progress [][2]int
	res, err := m.Up(ctx, &keelmigrate.UpOpts{OnProgress: func(done, total int, cur keelmigrate.Migration) {
		if cur.Line != keelmigrate.EngineLine {
			t.Errorf("progress for line %q", cur.Line)
		}
		progress = append(progress, [2]int{done, total})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(versions(res.Migrations), versions(engine)) || res.Direction != keelmigrate.DirectionUp {
		t.Fatalf("Up result: %+v", res)
	}
	if len(progress) != len(engine) || progress[len(progress)-1] != [2]int{len(engine), len(engine)} {
		t.Fatalf("progress calls: %v", progress)
	}
	for _, table := range []string{"keel_migration", "keel_job", "keel_queue", "keel_leader", "keel_audit"} {
		if !tableExists(t, d.Executor(), table) {
			t.Fatalf("table %s missing after Up", table)
		}
	}
	if err := m.Validate(ctx); err != nil {
		t.Fatalf("Validate after Up: %v", err)
	}
	st, err = m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := lineStatus(t, st, keelmigrate.EngineLine)
	if len(s.Pending) != 0 || !slices.Equal(appliedVersions(s.Applied), versions(engine)) || s.Current != engine[len(engine)-1].Version {
		t.Fatalf("status after Up: %+v", s)
	}
	if s.Applied[0].AppliedAt.IsZero() {
		t.Fatalf("applied_at not recorded: %+v", s.Applied[0])
	}

	// Idempotent.
	res, err = m.Up(ctx, nil)
	if err != nil || len(res.Migrations) != 0 {
		t.Fatalf("second Up: %+v, %v", res, err)
	}

	// The engine's base version is protected.
	if len(engine) == 1 {
		if _, err := m.Down(ctx, &keelmigrate.DownOpts{Line: keelmigrate.EngineLine}); !errors.Is(err, keelmigrate.ErrEngineBase) {
			t.Fatalf("Down of engine version 1 without All: %v", err)
		}
	}
	if _, err := m.Down(ctx, &keelmigrate.DownOpts{Line: keelmigrate.EngineLine, Steps: len(engine) + 5}); !errors.Is(err, keelmigrate.ErrEngineBase) {
		t.Fatalf("Down below engine version 1 without All: %v", err)
	}
	if !tableExists(t, d.Executor(), "keel_job") {
		t.Fatal("a refused Down changed the schema")
	}
	if _, err := m.Down(ctx, nil); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("Down without a line: %v", err)
	}

	res, err = m.Down(ctx, &keelmigrate.DownOpts{Line: keelmigrate.EngineLine, All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Migrations) != len(engine) || res.Migrations[0].Version != engine[len(engine)-1].Version || res.Direction != keelmigrate.DirectionDown {
		t.Fatalf("Down result: %+v", res)
	}
	if tableExists(t, d.Executor(), "keel_job") {
		t.Fatal("keel_job survived Down All")
	}
	st, err = m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := lineStatus(t, st, keelmigrate.EngineLine); len(s.Applied) != 0 || len(s.Pending) != len(engine) || s.Current != 0 {
		t.Fatalf("status after Down All: %+v", s)
	}

	// And back up again.
	if _, err := m.Up(ctx, nil); err != nil {
		t.Fatalf("Up after Down All: %v", err)
	}
	if err := m.Validate(ctx); err != nil {
		t.Fatal(err)
	}
}

// widgetFS is a module line valid on both dialects, with a gap (no 002), an
// irreversible migration (004) and files that are not migrations.
func widgetFS() fstest.MapFS {
	return mapFS(map[string]string{
		"001_create_widget.up.sql": `CREATE TABLE widget (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO widget (id, name) VALUES (1, 'first');`,
		"001_create_widget.down.sql": `DROP TABLE widget;`,
		"003_add_color.up.sql":       `ALTER TABLE widget ADD COLUMN color TEXT;`,
		"003_add_color.down.sql":     `ALTER TABLE widget DROP COLUMN color;`,
		"0004_gadget.up.sql":         `CREATE TABLE gadget (id INTEGER PRIMARY KEY);`,
		"README.md":                  "not a migration",
		"notes/999_x.up.sql":         "SELECT 1;", // subdirectories are ignored
	})
}

func TestModuleLine(t *testing.T) {
	bare(t, testModuleLine[pgx.Tx], testModuleLine[*sql.Tx])
}

func testModuleLine[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	m, err := keelmigrate.New(d, &keelmigrate.Config{Lines: []keelmigrate.Line{{Name: "widgets", FS: widgetFS()}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Lines(); len(got) != 2 || got[0] != keelmigrate.EngineLine || got[1] != "widgets" {
		t.Fatalf("Lines: %v", got)
	}
	if got := versions(m.Migrations("widgets")); !slices.Equal(got, []int{1, 3, 4}) {
		t.Fatalf("widgets versions: %v", got)
	}

	// A module line cannot go first on an empty database.
	if _, err := m.Up(ctx, &keelmigrate.UpOpts{Line: "widgets"}); err == nil || !strings.Contains(err.Error(), "engine") {
		t.Fatalf("module Up before the engine: %v", err)
	}
	if _, err := m.Up(ctx, &keelmigrate.UpOpts{Line: "nope"}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("unknown line: %v", err)
	}
	if _, err := m.Up(ctx, &keelmigrate.UpOpts{TargetVersion: 3}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("target without a line: %v", err)
	}
	if _, err := m.Up(ctx, &keelmigrate.UpOpts{Line: "widgets", TargetVersion: 2}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("target version that does not exist: %v", err)
	}

	if _, err := m.Up(ctx, &keelmigrate.UpOpts{Line: keelmigrate.EngineLine}); err != nil {
		t.Fatal(err)
	}
	res, err := m.Up(ctx, &keelmigrate.UpOpts{Line: "widgets", TargetVersion: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(versions(res.Migrations), []int{1, 3}) {
		t.Fatalf("Up to 3: %v", versions(res.Migrations))
	}
	var pe *keelmigrate.PendingError
	if err := m.Validate(ctx); !errors.As(err, &pe) || len(pe.Pending) != 1 || !strings.Contains(err.Error(), "widgets/004_gadget") {
		t.Fatalf("Validate with widgets/4 pending: %v", err)
	}
	if err := d.Executor().Exec(ctx, "INSERT INTO widget (id, name, color) VALUES (2, 'second', 'red')"); err != nil {
		t.Fatalf("widget table after Up: %v", err)
	}

	res, err = m.Up(ctx, nil)
	if err != nil || !slices.Equal(versions(res.Migrations), []int{4}) {
		t.Fatalf("Up all: %+v, %v", res, err)
	}
	st, err := m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := lineStatus(t, st, "widgets"); s.Current != 4 || !slices.Equal(appliedVersions(s.Applied), []int{1, 3, 4}) || len(s.Pending) != 0 || !s.Configured {
		t.Fatalf("widgets status: %+v", s)
	}

	// 004 has no down file: reverting it is refused before anything runs.
	if _, err := m.Down(ctx, &keelmigrate.DownOpts{Line: "widgets"}); err == nil || !strings.Contains(err.Error(), "0004_gadget.up.sql") {
		t.Fatalf("Down of an irreversible migration: %v", err)
	}
	// Forget 004 by hand (as an operator would), then step down.
	if err := d.Executor().MigrationForget(ctx, "widgets", 4); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Down(ctx, &keelmigrate.DownOpts{Line: "widgets", Steps: 1, All: true}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("Steps with All: %v", err)
	}
	res, err = m.Down(ctx, &keelmigrate.DownOpts{Line: "widgets"})
	if err != nil || !slices.Equal(versions(res.Migrations), []int{3}) {
		t.Fatalf("Down one step: %+v, %v", res, err)
	}
	if err := d.Executor().Exec(ctx, "INSERT INTO widget (id, name, color) VALUES (3, 'third', 'blue')"); err == nil {
		t.Fatal("column color survived its down migration")
	}

	// Rows in keel_migration without files: a newer binary's migration, and
	// a line this binary does not know.
	for _, row := range []*keeldriver.MigrationRow{
		{Line: "widgets", Version: 9, Name: "from_the_future"},
		{Line: "ghost", Version: 2, Name: "haunt"},
	} {
		if err := d.Executor().MigrationRecord(ctx, row); err != nil {
			t.Fatal(err)
		}
	}
	st, err = m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := lineStatus(t, st, "widgets")
	if s.Current != 9 || len(s.Unknown) != 1 || s.Unknown[0].Version != 9 || !slices.Equal(versions(s.Pending), []int{3, 4}) {
		t.Fatalf("widgets status with an unknown version: %+v", s)
	}
	if g := lineStatus(t, st, "ghost"); g.Configured || len(g.Unknown) != 1 || g.Current != 2 {
		t.Fatalf("ghost status: %+v", g)
	}
	if st[0].Line != keelmigrate.EngineLine {
		t.Fatalf("engine is not first: %+v", st)
	}
	if _, err := m.Down(ctx, &keelmigrate.DownOpts{Line: "widgets"}); err == nil || !strings.Contains(err.Error(), "no migration file") {
		t.Fatalf("Down of an unknown version: %v", err)
	}
	if err := d.Executor().MigrationForget(ctx, "widgets", 9); err != nil {
		t.Fatal(err)
	}

	// TargetVersion 1 reverts nothing more (3 is already down); All reverts 1.
	res, err = m.Down(ctx, &keelmigrate.DownOpts{Line: "widgets", TargetVersion: 1})
	if err != nil || len(res.Migrations) != 0 {
		t.Fatalf("Down to 1: %+v, %v", res, err)
	}
	res, err = m.Down(ctx, &keelmigrate.DownOpts{Line: "widgets", All: true})
	if err != nil || !slices.Equal(versions(res.Migrations), []int{1}) {
		t.Fatalf("Down All: %+v, %v", res, err)
	}
	if tableExists(t, d.Executor(), "widget") {
		t.Fatal("widget survived Down All")
	}
	// The engine is untouched.
	if !tableExists(t, d.Executor(), "keel_job") {
		t.Fatal("module Down touched the engine")
	}
}

func TestFailingMigrationRollsBack(t *testing.T) {
	bare(t, testFailingMigration[pgx.Tx], testFailingMigration[*sql.Tx])
}

func testFailingMigration[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	ctx := context.Background()
	files := mapFS(map[string]string{
		"001_ok.up.sql":   "CREATE TABLE ok_tbl (id INTEGER PRIMARY KEY);",
		"001_ok.down.sql": "DROP TABLE ok_tbl;",
		// The first statement succeeds; the second fails. Nothing may stay.
		"002_broken.up.sql": "CREATE TABLE half_done (id INTEGER PRIMARY KEY);\nINSERT INTO no_such_table (id) VALUES (1);",
		"003_never.up.sql":  "CREATE TABLE never_tbl (id INTEGER PRIMARY KEY);",
	})
	m, err := keelmigrate.New(d, &keelmigrate.Config{Lines: []keelmigrate.Line{{Name: "mod", FS: files}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Up(ctx, nil)
	var me *keelmigrate.MigrationError
	if !errors.As(err, &me) {
		t.Fatalf("want a *MigrationError, got %v", err)
	}
	if me.File != "002_broken.up.sql" || me.Migration.Line != "mod" || me.Migration.Version != 2 ||
		!strings.Contains(err.Error(), "002_broken.up.sql") || !strings.Contains(err.Error(), `"mod"`) {
		t.Fatalf("error does not name the file: %v (%+v)", err, me)
	}
	if res == nil || len(res.Migrations) == 0 || res.Migrations[len(res.Migrations)-1].UpFile != "001_ok.up.sql" {
		t.Fatalf("result before the failure: %+v", res)
	}
	if tableExists(t, d.Executor(), "half_done") {
		t.Fatal("the failing migration's first statement was not rolled back")
	}
	if tableExists(t, d.Executor(), "never_tbl") {
		t.Fatal("Up went on after a failure")
	}
	if !tableExists(t, d.Executor(), "ok_tbl") {
		t.Fatal("the migration before the failure was lost")
	}
	st, err := m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := lineStatus(t, st, "mod"); !slices.Equal(appliedVersions(s.Applied), []int{1}) || !slices.Equal(versions(s.Pending), []int{2, 3}) {
		t.Fatalf("status after the failure: %+v", s)
	}
}

// fakeDriver supplies only what New uses (Dialect, Migrations); any other
// call panics on the nil embedded interface.
type fakeDriver struct {
	keeldriver.Driver[struct{}]
	files fs.FS
}

func (f fakeDriver) Dialect() string   { return "sqlite" }
func (f fakeDriver) Migrations() fs.FS { return f.files }
func engineFS() fstest.MapFS           { return mapFS(map[string]string{"001_engine.up.sql": "SELECT 1;"}) }
func newFake(lines ...keelmigrate.Line) (*keelmigrate.Migrator[struct{}], error) {
	return keelmigrate.New[struct{}](fakeDriver{files: engineFS()}, &keelmigrate.Config{Lines: lines})
}

func TestBadFilesRejected(t *testing.T) {
	ok := "SELECT 1;"
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string // substrings of the error
	}{
		{"no direction", map[string]string{"001_x.sql": ok}, []string{"001_x.sql", "bad migration file name"}},
		{"dash separator", map[string]string{"001-x.up.sql": ok}, []string{"001-x.up.sql", "bad migration file name"}},
		{"no version", map[string]string{"create.up.sql": ok}, []string{"create.up.sql", "bad migration file name"}},
		{"no name", map[string]string{"001.up.sql": ok}, []string{"001.up.sql", "bad migration file name"}},
		{"space in name", map[string]string{"001_a b.up.sql": ok}, []string{"001_a b.up.sql"}},
		{"sideways", map[string]string{"001_x.sideways.sql": ok}, []string{"001_x.sideways.sql"}},
		{"version zero", map[string]string{"000_x.up.sql": ok}, []string{"000_x.up.sql", "positive"}},
		{"duplicate version", map[string]string{"001_a.up.sql": ok, "1_b.up.sql": ok}, []string{"duplicate version 1", "1_b.up.sql", "001_a.up.sql"}},
		{"down without up", map[string]string{"001_a.up.sql": ok, "002_b.down.sql": ok}, []string{"002_b.down.sql", "without an up file"}},
		{"names differ", map[string]string{"001_a.up.sql": ok, "001_b.down.sql": ok}, []string{"001_b.down.sql", "001_a.up.sql"}},
		{"empty up", map[string]string{"001_a.up.sql": "  \n"}, []string{"001_a.up.sql", "empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newFake(keelmigrate.Line{Name: "mod", FS: mapFS(tc.files)})
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range append(tc.want, `line "mod"`) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}

	t.Run("every problem reported", func(t *testing.T) {
		_, err := newFake(
			keelmigrate.Line{Name: "a", FS: mapFS(map[string]string{"x.sql": ok})},
			keelmigrate.Line{Name: "b", FS: mapFS(map[string]string{"y.sql": ok})},
		)
		if err == nil || !strings.Contains(err.Error(), "x.sql") || !strings.Contains(err.Error(), "y.sql") {
			t.Fatalf("want both files named: %v", err)
		}
	})

	for name, lines := range map[string][]keelmigrate.Line{
		"reserved name":  {{Name: "engine", FS: engineFS()}},
		"bad line name":  {{Name: "Bad Name", FS: engineFS()}},
		"empty name":     {{Name: "", FS: engineFS()}},
		"duplicate line": {{Name: "m", FS: engineFS()}, {Name: "m", FS: engineFS()}},
		"nil FS":         {{Name: "m"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := newFake(lines...); err == nil {
				t.Fatal("accepted")
			}
		})
	}

	t.Run("bad engine file", func(t *testing.T) {
		_, err := keelmigrate.New[struct{}](fakeDriver{files: mapFS(map[string]string{"1_x.up.sql": ok, "01_y.up.sql": ok})}, nil)
		if err == nil || !strings.Contains(err.Error(), `line "engine"`) {
			t.Fatalf("duplicate engine version: %v", err)
		}
	})

	t.Run("valid", func(t *testing.T) {
		m, err := newFake(keelmigrate.Line{Name: "widgets", FS: widgetFS()})
		if err != nil {
			t.Fatal(err)
		}
		ms := m.Migrations("widgets")
		if !slices.Equal(versions(ms), []int{1, 3, 4}) || ms[2].DownFile != "" || ms[0].Name != "create_widget" ||
			!strings.Contains(ms[0].UpSQL(), "CREATE TABLE widget") || ms[0].String() != "widgets/001_create_widget" {
			t.Fatalf("parsed: %+v", ms)
		}
	})
}

// noLock hides the dialect so that the migrator takes no lock statement.
type noLock[TTx any] struct{ keeldriver.Driver[TTx] }

func (noLock[TTx]) Dialect() string { return "postgres-without-lock" }

// TestConcurrentUp runs Up from two migrators with separate pools on one
// database at once: every migration is applied exactly once (a second
// application of any of them would fail: none uses IF NOT EXISTS).
func TestConcurrentUp(t *testing.T) {
	line := func(dialect string) keelmigrate.Line {
		files := map[string]string{}
		for _, n := range []string{"001_a", "002_b", "003_c", "004_d", "005_e"} {
			files[n+".up.sql"] = "CREATE TABLE conc_" + n[4:] + " (id INTEGER PRIMARY KEY);"
			files[n+".down.sql"] = "DROP TABLE conc_" + n[4:] + ";"
		}
		if dialect == "postgres" {
			// Keep the first migrator inside a migration for a while so that
			// the second certainly has to wait on the lock.
			files["003_c.up.sql"] += "\nSELECT pg_sleep(0.2);"
		}
		return keelmigrate.Line{Name: "conc", FS: mapFS(files)}
	}
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		d1, schema := testdb.OpenPostgres(t, &testdb.Options{Bare: true})
		d2, err := keelpgx.Open(context.Background(), testdb.PoolURL(t), &keelpgx.Config{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d2.Close() })
		testConcurrentUp[pgx.Tx](t, line("postgres"), d1, d2)
	})
	// Without the advisory lock, migrators race for real; the primary key
	// of keel_migration and the re-check after a failure must still leave
	// every migration applied once and both Up calls successful.
	t.Run("postgres-without-lock", func(t *testing.T) {
		t.Parallel()
		d1, schema := testdb.OpenPostgres(t, &testdb.Options{Bare: true})
		d2, err := keelpgx.Open(context.Background(), testdb.PoolURL(t), &keelpgx.Config{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d2.Close() })
		testConcurrentUp[pgx.Tx](t, line("postgres"), noLock[pgx.Tx]{d1}, noLock[pgx.Tx]{d2})
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		d1, path := testdb.OpenSQLite(t, &testdb.Options{Bare: true})
		d2, err := keelsqlite.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d2.Close() })
		testConcurrentUp[*sql.Tx](t, line("sqlite"), d1, d2)
	})
}

func testConcurrentUp[TTx any](t *testing.T, line keelmigrate.Line, drivers ...keeldriver.Driver[TTx]) {
	ctx := context.Background()
	const rounds = 3
	for round := range rounds {
		if round > 0 {
			// Start over: revert the module and the engine.
			m, err := keelmigrate.New(drivers[0], &keelmigrate.Config{Lines: []keelmigrate.Line{line}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Down(ctx, &keelmigrate.DownOpts{Line: "conc", All: true}); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Down(ctx, &keelmigrate.DownOpts{Line: keelmigrate.EngineLine, All: true}); err != nil {
				t.Fatal(err)
			}
		}

		results := make([]*keelmigrate.Result, len(drivers))
		errs := make([]error, len(drivers))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, d := range drivers {
			m, err := keelmigrate.New(d, &keelmigrate.Config{Lines: []keelmigrate.Line{line}})
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				<-start
				results[i], errs[i] = m.Up(ctx, nil)
			})
		}
		close(start)
		wg.Wait()

		seen := map[string]int{}
		for i := range drivers {
			if errs[i] != nil {
				t.Fatalf("round %d: migrator %d: %v", round, i, errs[i])
			}
			for _, mig := range results[i].Migrations {
				seen[mig.String()]++
			}
		}
		m, err := keelmigrate.New(drivers[0], &keelmigrate.Config{Lines: []keelmigrate.Line{line}})
		if err != nil {
			t.Fatal(err)
		}
		want := len(m.Migrations(keelmigrate.EngineLine)) + len(m.Migrations("conc"))
		if len(seen) != want {
			t.Fatalf("round %d: %d distinct migrations applied, want %d: %v", round, len(seen), want, seen)
		}
		for name, n := range seen {
			if n != 1 {
				t.Fatalf("round %d: %s applied %d times", round, name, n)
			}
		}
		if err := m.Validate(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		t.Logf("round %d: migrator 0 applied %d skipped %d; migrator 1 applied %d skipped %d", round,
			len(results[0].Migrations), len(results[0].Skipped), len(results[1].Migrations), len(results[1].Skipped))
	}
}
