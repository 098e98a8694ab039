package delivery

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelsql"
)

// BenchmarkLoad200 is the gateway load benchmark on PostgreSQL: 200 CMPP
// customer connections, limits out of the way, deliveries with ACKs.
// DELIVERY_BENCH_RECORDS sets the deliveries per run (default 50,000).
//
//	go test -run XXX -bench Load200 -benchtime 1x ./modules/delivery/
func BenchmarkLoad200(b *testing.B) {
	records := 50000
	if s := os.Getenv("DELIVERY_BENCH_RECORDS"); s != "" {
		records, _ = strconv.Atoi(s)
	}
	for range b.N {
		d, _ := testdb.OpenPostgres(b, &testdb.Options{Lines: Lines})
		res, err := RunLoad(context.Background(), d, keelsql.Pgx(d.Pool()), LoadConfig{Apps: 200, Records: records, Workers: benchWorkers()})
		if err != nil {
			b.Fatal(err)
		}
		if res.Lost != 0 || res.Duplicates != 0 || res.Delivered != records {
			b.Fatalf("lost or duplicated deliveries: %s", res)
		}
		b.Logf("%s", res)
		b.ReportMetric(res.PerSecond, "deliveries/s")
		b.ReportMetric(res.HeapPeakMB, "heap-peak-MB")
	}
}

// TestLoadSmall runs the load benchmark's code on a small scale (20
// connections, 2,000 deliveries): nothing lost, nothing duplicated.
func TestLoadSmall(t *testing.T) {
	t.Parallel()
	d, _ := testdb.OpenPostgres(t, &testdb.Options{Lines: Lines})
	res, err := RunLoad(context.Background(), d, keelsql.Pgx(d.Pool()), LoadConfig{Apps: 20, Records: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Lost != 0 || res.Duplicates != 0 || res.Delivered != 2000 || res.Received != 2000 {
		t.Fatalf("%s", res)
	}
	t.Logf("%s", res)
}

func benchWorkers() int {
	n, _ := strconv.Atoi(os.Getenv("DELIVERY_BENCH_WORKERS"))
	return n
}
