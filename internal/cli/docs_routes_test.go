package cli_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

var (
	docMethod = regexp.MustCompile(`^(GET|POST|PUT|PATCH|DELETE)$`)
	docRoute  = regexp.MustCompile("`((GET|POST|PUT|PATCH|DELETE) )?(/[^`]*)`")
)

// documentedRoutes reads the route tables of a doc: rows whose first cell
// is a method and second cell backticked paths (operations, delivery), or
// rows whose first cell holds backticked "METHOD /path" items (reservation,
// relative to base). "· `/resume`" and "· `check-in`" are siblings of the
// previous path's last segment.
func documentedRoutes(t *testing.T, file, base string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		first, second := strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2])
		method, text := "", first
		if docMethod.MatchString(first) {
			method, text = first, second
		} else if !strings.HasPrefix(first, "`GET ") && !strings.HasPrefix(first, "`POST ") &&
			!strings.HasPrefix(first, "`PUT ") && !strings.HasPrefix(first, "`PATCH ") && !strings.HasPrefix(first, "`DELETE ") {
			continue
		}
		last := ""
		for _, part := range regexp.MustCompile(` · |, `).Split(text, -1) {
			part = strings.TrimSpace(part)
			m := docRoute.FindStringSubmatch(part)
			var path string
			switch {
			case m != nil:
				if m[2] != "" {
					method = m[2]
				}
				path = m[3]
				if !strings.HasPrefix(path, "/api/v1") && !strings.HasPrefix(path, "/admin/") {
					path = base + path
				}
				if last != "" && !strings.Contains(part, "/api/") && !strings.Contains(part, "/admin/") && strings.Count(m[3], "/") == 1 && m[2] == "" {
					path = last[:strings.LastIndex(last, "/")] + m[3]
				}
			case strings.HasPrefix(part, "`") && last != "":
				path = last[:strings.LastIndex(last, "/")+1] + strings.Trim(part, "`")
			default:
				continue
			}
			if i := strings.Index(path, "?"); i >= 0 {
				path = path[:i]
			}
			out[method+" "+path] = true
			last = path
		}
	}
	return out
}

// TestDocumentedRoutesAreTheRealOnes: the route tables of
// docs/operations.md, docs/delivery.md and docs/reservation.md name
// exactly the routes `keel serve` with every module serves.
func TestDocumentedRoutesAreTheRealOnes(t *testing.T) {
	t.Parallel()
	srv, _, _ := startServe(t)
	real := map[string]bool{}
	_ = chi.Walk(srv.API().Router(), func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		real[method+" "+pattern] = true
		return nil
	})
	// The three route references must hold only real routes; any doc may
	// document a route (a module's own page).
	doc := documentedRoutes(t, "../../docs/operations.md", "")
	for k := range documentedRoutes(t, "../../docs/delivery.md", "") {
		doc[k] = true
	}
	for k := range documentedRoutes(t, "../../docs/reservation.md", "/api/v1/reservation") {
		doc[k] = true
	}
	anywhere := map[string]bool{}
	files, _ := filepath.Glob("../../docs/*.md")
	for _, f := range files {
		for k := range documentedRoutes(t, f, "") {
			anywhere[k] = true
		}
	}
	var missing, phantom []string
	for r := range real {
		if !doc[r] && !anywhere[r] {
			missing = append(missing, r)
		}
	}
	for r := range doc {
		if !real[r] {
			phantom = append(phantom, r)
		}
	}
	sort.Strings(missing)
	sort.Strings(phantom)
	if len(missing) > 0 {
		t.Errorf("served but not documented:\n  %s", strings.Join(missing, "\n  "))
	}
	if len(phantom) > 0 {
		t.Errorf("documented but not served:\n  %s", strings.Join(phantom, "\n  "))
	}
	t.Logf("%d routes, all documented", len(real))
}
