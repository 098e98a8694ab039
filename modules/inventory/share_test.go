package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module/moduletest"
)

// TestInventoryReservedShare: a reservation flood cannot take every
// database connection from confirmations and releases. The module's pool
// has 10 connections and reservations 4 of them (reservation_conns); 40
// HTTP callers reserve a hot SKU on the row-lock path while another
// session holds that SKU's stock row locked for 8 s, so every reservation
// transaction that gets a connection waits on the lock holding it. Before
// the slots, those waiting reservations held all 10 connections and a
// confirmation of another SKU waited the 8 s for the lock's release to
// free one. Now, during the lock: the reservations past their 4 slots get
// 429 with Retry-After within the pool-wait budget and write nothing, and
// confirms and releases of reservations of another SKU each complete over
// HTTP within 2 s (a bound for a loaded machine; unloaded they take
// milliseconds). PostgreSQL only: SQLite has one writer connection, which
// no share can divide.
func TestInventoryReservedShare(t *testing.T) {
	e := newTenv(moduletest.Postgres(t, testLines))
	ctx := context.Background()
	sep := "?"
	if strings.Contains(e.DSN, "?") {
		sep = "&"
	}
	pool, err := pgxpool.New(ctx, e.DSN+sep+"pool_max_conns=10")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.DB = keelsql.Pgx(pool)
	m := e.build(t, map[string]string{"inventory.coalesce": "false", "inventory.reservation_conns": "4",
		"inventory.pool_wait_budget": "200ms"})
	seed(t, m, "WH1", "HOT", 1000)
	seed(t, m, "WH1", "COLD", 100)
	e.start(t)
	api := moduletest.ServeAPI(t, m.Routes(), "op")
	var ids, versions []int64
	for i := range 6 {
		// The setup's reservations come before the flood, as a client
		// honouring Retry-After sends them: the pool's first connections
		// are dialled inside the pool-wait budget's measure, and on a
		// loaded machine those dials alone can put the watermark over for
		// its window.
		body := map[string]any{"order_line": fmt.Sprintf("C%d-1", i), "warehouse": "WH1", "sku": "COLD", "qty": 1}
		r := moduletest.Do(t, api.URL, "POST", "/api/v1/inventory/reservations", body, nil)
		for try := 0; r.Status == http.StatusTooManyRequests && try < 5; try++ {
			after, err := strconv.Atoi(r.Header.Get("Retry-After"))
			if err != nil || after <= 0 {
				t.Fatalf("429 with Retry-After %q", r.Header.Get("Retry-After"))
			}
			time.Sleep(time.Duration(after) * time.Second) // what the server asked of its client
			r = moduletest.Do(t, api.URL, "POST", "/api/v1/inventory/reservations", body, nil)
		}
		if r.Status != http.StatusOK {
			t.Fatalf("reserving COLD: %d %v", r.Status, r.Body)
		}
		ids = append(ids, int64(r.Body["reservation_id"].(float64)))
		versions = append(versions, int64(r.Body["stock_version"].(float64)))
	}

	// Another session locks HOT's stock row for 8 s.
	locker, err := pgx.Connect(ctx, e.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	lockTx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockTx.Exec(ctx, "SELECT 1 FROM inv_stock WHERE warehouse_id = 'WH1' AND sku_id = 'HOT' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	// The flood is watched from a session of its own (the pool's may all
	// be taken, and the locker's is the lock's).
	watch, err := pgx.Connect(ctx, e.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	const hold = 8 * time.Second
	locked := time.Now()
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(hold) // the length of the lock is the scenario, not a wait for a condition
		_ = lockTx.Commit(ctx)
	}()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var refused, other atomic.Int64
	var refusedLines sync.Map
	var badRetry atomic.Value
	for c := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				line := fmt.Sprintf("H%d-%d", c, n)
				b, _ := json.Marshal(map[string]any{"order_line": line, "warehouse": "WH1", "sku": "HOT", "qty": 1})
				resp, err := http.Post(api.URL+"/api/v1/inventory/reservations", "application/json", bytes.NewReader(b))
				if err != nil {
					other.Add(1)
					return
				}
				_ = resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusTooManyRequests:
					refused.Add(1)
					refusedLines.Store(line, true)
					if resp.Header.Get("Retry-After") == "" {
						badRetry.Store(line)
					}
					time.Sleep(50 * time.Millisecond) // a client honouring Retry-After, shortened
				case http.StatusOK:
				default:
					other.Add(1)
				}
			}
		}()
	}
	// The flood saturates: reservations wait on the lock holding their
	// connections, and either the rest are refused (their slots taken) or
	// they have taken every connection of the pool (as before the slots).
	eventually(t, "the flood to saturate", func() bool {
		var waiting int
		if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Error(err)
			return true
		}
		st := pool.Stat()
		return waiting >= 4 && (refused.Load() > 0 || st.AcquiredConns() == st.MaxConns())
	})

	// Confirms and releases of COLD go through meanwhile, each within 2 s.
	const bound = 2 * time.Second
	for i, id := range ids {
		if time.Since(locked) > hold-bound {
			t.Fatalf("the flood took %s to start; the lock is released before the confirmations could be timed", time.Since(locked))
		}
		action, body := "confirm", map[string]any{"receipt": fmt.Sprintf("R%d", i), "stock_version": versions[i]}
		if i%2 == 1 {
			action, body = "release", map[string]any{"reason": "cancelled"}
		}
		start := time.Now()
		r := moduletest.Do(t, api.URL, "POST", "/api/v1/inventory/reservations/"+itoa(id)+"/"+action, body, nil)
		took := time.Since(start)
		if r.Status != http.StatusOK {
			t.Fatalf("%s of %d during the flood: %d %v", action, id, r.Status, r.Body)
		}
		if took > bound {
			t.Errorf("%s of %d during the flood took %s; want within %s (the reservations took the connections)", action, id, took.Round(time.Millisecond), bound)
		}
		t.Logf("%s during the flood: %s", action, took.Round(time.Millisecond))
	}
	if time.Since(locked) >= hold {
		t.Fatalf("the confirmations ended after the lock was released (%s): they did not run during the flood", time.Since(locked))
	}
	close(stop)
	wg.Wait()
	<-released
	if refused.Load() == 0 {
		t.Error("no reservation was refused during the flood")
	}
	if v := badRetry.Load(); v != nil {
		t.Errorf("429 without Retry-After (order line %v)", v)
	}
	if other.Load() > 0 {
		t.Errorf("%d reservations failed otherwise than 200 or 429", other.Load())
	}
	// Refused reservations wrote nothing.
	var lines []string
	refusedLines.Range(func(k, _ any) bool { lines = append(lines, k.(string)); return true })
	if n := e.Count(t, "SELECT count(*) FROM inv_reservation WHERE order_line = ANY($1)", lines); n != 0 {
		t.Errorf("%d of %d refused reservations were written", n, len(lines))
	}
	if n := e.Count(t, "SELECT count(*) FROM inv_action WHERE action_key = ANY($1)", prefixed("reserve:", lines)); n != 0 {
		t.Errorf("%d of %d refused reservations recorded their key", n, len(lines))
	}
	t.Logf("%d reservations refused during the %s lock", refused.Load(), hold)
}

func prefixed(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}
