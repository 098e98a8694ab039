package testdb_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/keelwork/keel/internal/testdb"
)

// TestPoolParametersInURL: a database URL sized for pgxpool, the way the
// operations guide tells users to size the pool, opens test databases:
// the single connections the helper opens itself drop pool parameters.
func TestPoolParametersInURL(t *testing.T) {
	u := os.Getenv(testdb.EnvURL)
	if u == "" {
		u = testdb.DefaultURL
	}
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	t.Setenv(testdb.EnvURL, u+sep+"pool_max_conns=4")
	d, _ := testdb.OpenPostgres(t, nil)
	var one int
	if err := d.Pool().QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("query: %d %v", one, err)
	}
}
