package keelpgx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

func testURL() string {
	if u := os.Getenv("KEEL_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// newTestDriver opens a driver on a fresh schema with the engine migrations
// applied; the schema is dropped when the test ends.
func newTestDriver(t *testing.T) *Driver {
	t.Helper()
	ctx := context.Background()
	schema := "keeltest_" + randomHex(t)
	admin, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("creating schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping schema: %v", err)
		}
	})
	d, err := Open(ctx, testURL(), &Config{Schema: schema})
	if err != nil {
		t.Fatalf("opening driver: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	migrateUp(t, d)
	return d
}

func randomHex(t *testing.T) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func migrateUp(t *testing.T, d *Driver) {
	t.Helper()
	fsys := d.Migrations()
	files, err := fs.Glob(fsys, "*.up.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	slices.Sort(files)
	for _, f := range files {
		sql, err := fs.ReadFile(fsys, f)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Executor().Exec(context.Background(), string(sql)); err != nil {
			t.Fatalf("migration %s: %v", f, err)
		}
	}
}

func insert(t *testing.T, ex keeldriver.Executor, params ...*keeldriver.JobInsertParams) []keeldriver.JobInsertResult {
	t.Helper()
	res, err := ex.JobInsertMany(context.Background(), params)
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	return res
}

func job(kind string) *keeldriver.JobInsertParams {
	return &keeldriver.JobInsertParams{Kind: kind, Queue: "default", Args: json.RawMessage(`{"n":1}`), MaxAttempts: 3}
}

func TestListenerAndSchemaIsolation(t *testing.T) {
	d1 := newTestDriver(t)
	d2 := newTestDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l := d1.Listener()
	if err := l.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	if err := l.Listen(ctx, "job_insert"); err != nil {
		t.Fatal(err)
	}
	// d2 is another install in the same database: its notification must not
	// reach d1's listener; d1's own must.
	if err := d2.Notify(ctx, "job_insert", "from-d2"); err != nil {
		t.Fatal(err)
	}
	if err := d1.Notify(ctx, "job_insert", "from-d1"); err != nil {
		t.Fatal(err)
	}
	n, err := l.WaitForNotification(ctx)
	if err != nil || n.Topic != "job_insert" || n.Payload != "from-d1" {
		t.Fatalf("notification: %+v %v", n, err)
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if n, err := l.WaitForNotification(short); err == nil {
		t.Fatalf("unexpected notification %+v", n)
	}

	insert(t, d2.Executor(), job("iso"))
	if list, _ := d1.Executor().JobList(ctx, &keeldriver.JobListParams{}); len(list) != 0 {
		t.Fatalf("d1 sees d2's jobs: %d", len(list))
	}
	if list, _ := d2.Executor().JobList(ctx, &keeldriver.JobListParams{}); len(list) != 1 {
		t.Fatalf("d2 jobs: %d", len(list))
	}
}

func TestLongTopicChannel(t *testing.T) {
	ch := channelName("keeltest_0123456789ab", string(make([]byte, 100)))
	if len(ch) > maxChannelLen {
		t.Fatalf("channel %q longer than %d", ch, maxChannelLen)
	}
}

func TestConfig(t *testing.T) {
	if _, err := Open(context.Background(), testURL(), &Config{Schema: "bad-name; drop"}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("bad schema: %v", err)
	}
	d := newTestDriver(t)
	if _, err := New(d.Pool(), &Config{Schema: "other_schema"}); err == nil {
		t.Fatal("New accepted a pool with another search_path")
	}
	if d.Dialect() != "postgres" || !d.SupportsListener() {
		t.Fatal("capabilities")
	}
}

// TestClaimPool: the claim statements' pool takes its connections from the
// configured total, runs with generic plans and no sequential scans, and
// can be turned off; the main pool keeps the planner's defaults.
func TestClaimPool(t *testing.T) {
	ctx := context.Background()
	withConns := func(n string) string {
		u := testURL()
		if strings.Contains(u, "?") {
			return u + "&pool_max_conns=" + n
		}
		return u + "?pool_max_conns=" + n
	}
	show := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}, setting string) string {
		var v string
		if err := q.QueryRow(ctx, "SELECT current_setting($1)", setting).Scan(&v); err != nil {
			t.Fatalf("reading %s: %v", setting, err)
		}
		return v
	}
	for _, c := range []struct {
		url              string
		cfg              *Config
		main, claimConns int32
	}{
		{withConns("8"), nil, 6, 2},
		{withConns("40"), nil, 32, DefaultClaimConns},
		{withConns("20"), nil, 15, 5},
		{withConns("8"), &Config{ClaimConns: -1}, 8, 0},
		{withConns("8"), &Config{ClaimConns: 3}, 5, 3},
		{withConns("1"), nil, 1, 0},
	} {
		d, err := Open(ctx, c.url, c.cfg)
		if err != nil {
			t.Fatalf("opening %s: %v", c.url, err)
		}
		if got := d.Pool().Config().MaxConns; got != c.main {
			t.Errorf("%s %+v: main pool %d, want %d", c.url, c.cfg, got, c.main)
		}
		if c.claimConns == 0 {
			if d.claims != nil {
				t.Errorf("%s %+v: claim pool opened", c.url, c.cfg)
			}
		} else {
			if got := d.claims.Config().MaxConns; got != c.claimConns {
				t.Errorf("%s %+v: claim pool %d, want %d", c.url, c.cfg, got, c.claimConns)
			}
			if show(d.claims, "plan_cache_mode") != "force_generic_plan" || show(d.claims, "enable_seqscan") != "off" ||
				show(d.claims, "jit") != "off" {
				t.Errorf("claim pool settings not applied")
			}
		}
		if show(d.Pool(), "plan_cache_mode") != "auto" || show(d.Pool(), "enable_seqscan") != "on" {
			t.Errorf("main pool settings changed")
		}
		d.Close()
	}
}
