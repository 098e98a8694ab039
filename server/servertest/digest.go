package servertest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// Digest returns a function that digests every table of db's current
// schema (dialect "postgres" or "sqlite"), one "table=sha256" line per
// table, except what skip names: "table" (one background work changes by
// itself: leader leases, instance heartbeats) or "table.column". A
// token's last_used_at is always skipped: authenticating writes it.
func Digest(t testing.TB, db *sql.DB, dialect string, skip ...string) func() string {
	list := `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`
	if dialect == "sqlite" {
		list = `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`
	}
	skipped := map[string]bool{"keel_api_token.last_used_at": true}
	where := map[string]string{}
	for _, s := range skip {
		// "table WHERE condition" digests only the table's rows that match:
		// for a table some of whose rows the server writes by itself.
		if tb, cond, ok := strings.Cut(s, " WHERE "); ok {
			where[tb] = cond
			continue
		}
		skipped[s] = true
	}
	return func() string {
		ctx := context.Background()
		rows, err := db.QueryContext(ctx, list)
		if err != nil {
			t.Fatalf("digest: listing tables: %v", err)
		}
		var tables []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			if !skipped[n] {
				tables = append(tables, n)
			}
		}
		rows.Close()
		sort.Strings(tables)
		var out []string
		for _, tb := range tables {
			out = append(out, tb+"="+digestTable(t, db, tb, where[tb], skipped))
		}
		return strings.Join(out, "\n")
	}
}

func digestTable(t testing.TB, db *sql.DB, table, where string, skipped map[string]bool) string {
	q := `SELECT * FROM "` + table + `"`
	if where != "" {
		q += " WHERE " + where
	}
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("digest: reading %s: %v", table, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var lines []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("digest: scanning %s: %v", table, err)
		}
		var b strings.Builder
		for i, v := range vals {
			if skipped[table+"."+cols[i]] {
				continue
			}
			if x, ok := v.([]byte); ok {
				v = string(x)
			}
			fmt.Fprintf(&b, "%v\x1f", v)
		}
		lines = append(lines, b.String())
	}
	sort.Strings(lines)
	h := sha256.Sum256([]byte(strings.Join(lines, "\x1e")))
	return hex.EncodeToString(h[:8])
}
