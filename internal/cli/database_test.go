package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelwork/keel/internal/cli"
)

// TestCLISaysWhatIsWrongWithTheDatabase: on a database that is missing,
// unmigrated or unreachable, or a server address without a scheme, an
// admin verb says what is wrong and what to do, and leaves nothing behind.
func TestCLISaysWhatIsWrongWithTheDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		o    cli.AdminOpts
		want string
	}{
		{"missing sqlite", cli.AdminOpts{DatabaseURL: "sqlite:" + missing}, "keel migrate up"},
		{"unmigrated sqlite", cli.AdminOpts{DatabaseURL: "sqlite:" + empty}, "not migrated: run keel migrate up"},
		{"unreachable postgres", cli.AdminOpts{DatabaseURL: "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=2"}, "unreachable"},
		{"server without scheme", cli.AdminOpts{Server: "127.0.0.1:1", Token: "keel_x"}, "must start with http://"},
		{"server down", cli.AdminOpts{Server: "http://127.0.0.1:1", Token: "keel_x"}, "cannot reach the server"},
	} {
		var out, errOut bytes.Buffer
		o := c.o
		o.Out, o.Err = &out, &errOut
		err := cli.WithAPI(context.Background(), &o, func(ctx context.Context, ac *cli.APIClient) error {
			return cli.JobsList(ctx, ac, &o, &cli.JobFilter{})
		})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "HTTP 5") {
			t.Errorf("%s: %v, want a sentence with %q", c.name, err, c.want)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("an admin verb created %s: %v", missing, err)
	}
}
