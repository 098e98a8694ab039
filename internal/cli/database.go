// Package cli implements the keel command's verbs. cmd/keel only wires them
// to cobra; everything with logic lives here, with tests.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsqlite"
)

// DefaultDataDir holds the embedded SQLite database of `keel dev`.
const DefaultDataDir = ".keel"

// DriverFuncs runs a verb on whichever database a URL names. The engine is
// generic over the driver's transaction type, so a verb supplies one function
// per driver, usually both instantiations of one generic function.
type DriverFuncs struct {
	Postgres func(ctx context.Context, d *keelpgx.Driver) error
	SQLite   func(ctx context.Context, d *keelsqlite.Driver) error
}

// IsPostgresURL reports whether url names a PostgreSQL server.
func IsPostgresURL(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// WithDatabase opens the database url names — postgres://… or
// sqlite:PATH — and runs the matching function.
func WithDatabase(ctx context.Context, url, schema string, f DriverFuncs) error {
	if url == "" {
		return errors.New("no database: pass --database-url (postgres://… or sqlite:PATH) or set KEEL_DATABASE_URL")
	}
	if IsPostgresURL(url) {
		d, err := keelpgx.Open(ctx, url, &keelpgx.Config{Schema: schema})
		if err != nil {
			return fmt.Errorf("opening PostgreSQL: %w", err)
		}
		defer d.Close()
		return f.Postgres(ctx, d)
	}
	path, ok := strings.CutPrefix(url, "sqlite:")
	if !ok || path == "" {
		return fmt.Errorf("database URL %q is neither postgres://… nor sqlite:PATH", url)
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", dir, err)
		}
	}
	d, err := keelsqlite.Open(path, nil)
	if err != nil {
		return fmt.Errorf("opening SQLite %s: %w", path, err)
	}
	defer d.Close()
	return f.SQLite(ctx, d)
}

// existingDatabase refuses a SQLite path with no database yet: the admin
// verbs read and control a database, they never create one (which would
// leave an empty file behind).
func existingDatabase(url string) error {
	path, ok := strings.CutPrefix(url, "sqlite:")
	if !ok || path == "" {
		return nil
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no database at %s: create it with keel migrate up --database-url %s (or run keel dev)", path, url)
	}
	return nil
}

// unwrapURLError drops net/http's "Get \"…\": " prefix: the server's
// address is already named.
func unwrapURLError(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}
