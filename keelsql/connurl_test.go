package keelsql_test

import (
	"testing"

	"github.com/keelwork/keel/keelsql"
)

func TestSingleConnURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u@h:5432/db?pool_max_conns=16&sslmode=disable":  "postgres://u@h:5432/db?sslmode=disable",
		"postgres://u@h/db?sslmode=disable":                         "postgres://u@h/db?sslmode=disable",
		"host=h pool_max_conns=16 dbname=db pool_min_conns=2":       "host=h dbname=db",
		"postgresql://h/db?pool_max_conn_lifetime=1h&search_path=s": "postgresql://h/db?search_path=s",
	} {
		if got := keelsql.SingleConnURL(in); got != want {
			t.Errorf("SingleConnURL(%q) = %q, want %q", in, got, want)
		}
	}
}
