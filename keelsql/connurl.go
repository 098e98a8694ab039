package keelsql

import (
	"net/url"
	"strings"
)

// SingleConnURL removes pgxpool's own parameters (pool_max_conns,
// pool_min_conns, pool_max_conn_lifetime, …) from a PostgreSQL URL or
// keyword/value string, for the places that open one plain connection
// (pgx.Connect), which would otherwise send them to the server as runtime
// parameters and be refused. Other parameters are kept.
func SingleConnURL(u string) string {
	if strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://") {
		p, err := url.Parse(u)
		if err != nil {
			return u
		}
		q := p.Query()
		changed := false
		for k := range q {
			if strings.HasPrefix(k, "pool_") {
				q.Del(k)
				changed = true
			}
		}
		if changed {
			p.RawQuery = q.Encode()
		}
		return p.String()
	}
	var kept []string
	for _, f := range strings.Fields(u) {
		if !strings.HasPrefix(f, "pool_") {
			kept = append(kept, f)
		}
	}
	return strings.Join(kept, " ")
}
