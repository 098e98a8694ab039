package export

import (
	"bufio"
	"context"
	"crypto/sha256"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"gocloud.dev/blob"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/module/moduletest"
)

// BenchmarkExport measures, on PostgreSQL and fileblob in one run, a CSV
// export end to end (create → verified publish: shards, fenced chunk
// commits, merge, read-back verification) against the ceiling of
// `COPY (SELECT …) TO STDOUT` streamed into the same store with a SHA-256,
// and an XLSX export. Rows: KEEL_EXPORT_BENCH_ROWS (default 1,000,000);
// the XLSX export is of another tenant's KEEL_EXPORT_BENCH_XLSX_ROWS
// (default 100,000): excelize's per-cell encoding makes it the slow one.
// It reports rows/s of each and the process's peak RSS during the CSV
// export (VmHWM, reset before it through /proc/self/clear_refs).
func BenchmarkExport(b *testing.B) {
	rows := 1_000_000
	if s := os.Getenv("KEEL_EXPORT_BENCH_ROWS"); s != "" {
		rows, _ = strconv.Atoi(s)
	}
	xrows := 100_000
	if s := os.Getenv("KEEL_EXPORT_BENCH_XLSX_ROWS"); s != "" {
		xrows, _ = strconv.Atoi(s)
	}
	for i := 0; i < b.N; i++ {
		e := newTenv(moduletest.Postgres(b, testLines))
		m := e.build(b, map[string]string{"export.storage": "file", "export.memory_budget_mb": "96", "export.task_peak_mb": "24"})
		seed(b, m, "bench", rows, alice)
		seed(b, m, "bench-x", xrows, alice)
		e.start(b, m, 30*time.Second, false)
		ctx := context.Background()
		b.ResetTimer()

		// The ceiling: one COPY of the same rows into the same store.
		t0 := time.Now()
		copyRows := copyCeiling(b, e.DSN, m.Bucket(), rows)
		copyRate := float64(copyRows) / time.Since(t0).Seconds()

		resetPeakRSS()
		t0 = time.Now()
		task, err := m.Create(as(alice), Request{Tenant: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		done := waitState(b, m, task.ID, 2*time.Hour, StateSucceeded)
		csvRate := float64(done.ObjectRows) / time.Since(t0).Seconds()
		rss := peakRSS()
		b.Logf("%d rows: COPY %.0f rows/s, CSV export %.0f rows/s (%.0f%% of COPY), peak RSS %.1f MiB",
			rows, copyRate, csvRate, csvRate/copyRate*100, float64(rss)/(1<<20))

		t0 = time.Now()
		x, err := m.Create(as(alice), Request{Tenant: "bench-x", Format: "xlsx"})
		if err != nil {
			b.Fatal(err)
		}
		xd := waitState(b, m, x.ID, 2*time.Hour, StateSucceeded)
		xlsxRate := float64(xd.ObjectRows) / time.Since(t0).Seconds()
		b.StopTimer()
		b.ReportMetric(csvRate, "csv-rows/s")
		b.ReportMetric(copyRate, "copy-rows/s")
		b.ReportMetric(csvRate/copyRate*100, "%-of-copy")
		b.ReportMetric(xlsxRate, "xlsx-rows/s")
		b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MiB")
		_ = ctx
	}
}

// copyCeiling streams COPY (SELECT …) TO STDOUT (CSV, the same columns and
// cut condition) into an object of bucket, hashing it on the way.
func copyCeiling(b *testing.B, dsn string, bucket *blob.Bucket, want int) int64 {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	w, err := bucket.NewWriter(ctx, "bench/copy.csv", &blob.WriterOptions{BufferSize: 5 << 20, MaxConcurrency: 1})
	if err != nil {
		b.Fatal(err)
	}
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 256<<10)
	tag, err := conn.Conn().PgConn().CopyTo(ctx, bw, `COPY (SELECT id, order_no, customer, amount_minor, currency, status,
		to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') FROM export_orders
		WHERE tenant = 'bench' AND valid_from <= 1000000000 AND valid_to IS NULL ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER true)`)
	if err != nil {
		b.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if tag.RowsAffected() != int64(want) {
		b.Fatalf("COPY moved %d rows, want %d", tag.RowsAffected(), want)
	}
	return tag.RowsAffected()
}

func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func peakRSS() int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

var _ = testdb.PostgresURL
