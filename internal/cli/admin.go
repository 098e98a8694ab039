package cli

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsqlite"
	"github.com/keelwork/keel/server/api"
	"github.com/keelwork/keel/server/auth"
)

// AdminOpts choose where the admin verbs (jobs, queues, keys, audit,
// tokens) act: a remote server (Server + Token) or a local database.
type AdminOpts struct {
	Server      string
	Token       string
	DatabaseURL string
	Schema      string
	JSON        bool
	Out         io.Writer
	Err         io.Writer
}

// APIClient speaks the admin API, over HTTP or in process. Local mode runs
// the very same handler, so the CLI mirrors the API exactly.
type APIClient struct {
	do func(*http.Request) (*http.Response, error)
	// stream is do without a bound on the whole exchange, for answers
	// read as they arrive (downloads); nil means do.
	stream func(*http.Request) (*http.Response, error)
}

// ProblemError is a problem document returned by the API.
type ProblemError struct{ api.Problem }

// Error says what is wrong for a person: the detail (or the title when
// there is none), with the stable code for scripts and searches.
func (e *ProblemError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("%s (%s)", e.Title, e.Code)
	}
	return fmt.Sprintf("%s (%s)", e.Detail, e.Code)
}

// Call sends in (if not nil) as JSON and decodes the answer into out (if
// not nil); problems come back as *ProblemError. raw receives the body.
func (c *APIClient) Call(ctx context.Context, method, path string, in, out any) ([]byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		var p ProblemError
		if json.Unmarshal(raw, &p.Problem) != nil || p.Code == "" {
			return nil, fmt.Errorf("HTTP %d from %s %s", resp.StatusCode, method, path)
		}
		return nil, &p
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, fmt.Errorf("decoding %s %s: %w", method, path, err)
		}
	}
	return raw, nil
}

// Stream sends a request without a body and returns the answer's body to
// read as it arrives (modcli.Streamer); problems come back as
// *ProblemError, as from Call.
func (c *APIClient) Stream(ctx context.Context, method, path string) (io.ReadCloser, int64, error) {
	req, err := http.NewRequestWithContext(ctx, method, path, nil)
	if err != nil {
		return nil, 0, err
	}
	do := c.stream
	if do == nil {
		do = c.do
	}
	resp, err := do(req)
	if err != nil {
		return nil, 0, err
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var p ProblemError
		if json.Unmarshal(raw, &p.Problem) != nil || p.Code == "" {
			return nil, 0, fmt.Errorf("HTTP %d from %s %s", resp.StatusCode, method, path)
		}
		return nil, 0, &p
	}
	return resp.Body, resp.ContentLength, nil
}

// WithAPI runs f with a client for the server or database o names.
func WithAPI(ctx context.Context, o *AdminOpts, f func(ctx context.Context, c *APIClient) error) error {
	if o.Server != "" {
		if o.Token == "" {
			return errors.New("--server needs a token: set KEEL_TOKEN")
		}
		base := strings.TrimRight(o.Server, "/")
		if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
			return fmt.Errorf("--server %q must start with http:// or https:// (for example http://127.0.0.1:8080)", o.Server)
		}
		hc := &http.Client{Timeout: time.Minute}
		// A download may take longer than a minute to arrive: only the
		// wait for its headers is bounded.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = time.Minute
		hs := &http.Client{Transport: tr}
		via := func(hc *http.Client) func(*http.Request) (*http.Response, error) {
			return func(r *http.Request) (*http.Response, error) {
				u := *r.URL
				target, err := http.NewRequestWithContext(r.Context(), r.Method, base+u.String(), r.Body)
				if err != nil {
					return nil, err
				}
				target.Header = r.Header.Clone()
				target.Header.Set("Authorization", "Bearer "+o.Token)
				resp, err := hc.Do(target)
				if err != nil {
					return nil, fmt.Errorf("cannot reach the server at %s (is it running, and is the address right?): %w", base, unwrapURLError(err))
				}
				return resp, nil
			}
		}
		return f(ctx, &APIClient{do: via(hc), stream: via(hs)})
	}
	if err := existingDatabase(o.DatabaseURL); err != nil {
		return err
	}
	return WithDatabase(ctx, o.DatabaseURL, o.Schema, DriverFuncs{
		Postgres: func(ctx context.Context, d *keelpgx.Driver) error {
			db := stdlib.OpenDBFromPool(d.Pool())
			defer db.Close()
			return localAPI(ctx, d, db, keelsql.Pgx(d.Pool()), f)
		},
		SQLite: func(ctx context.Context, d *keelsqlite.Driver) error {
			return localAPI(ctx, d, d.DB(), keelsql.SQLite(d.DB()), f)
		},
	})
}

// localAPI serves the API in process as the local operator: whoever can
// open the database already has every power, so the role is admin; the
// audit names the OS user.
func localAPI[TTx any](ctx context.Context, d keeldriver.Driver[TTx], db *sql.DB, mdb keelsql.DB[TTx], f func(context.Context, *APIClient) error) error {
	client, err := keel.NewClient(d, &keel.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	name := "local"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	p := &auth.Principal{Name: "local", Role: auth.RoleAdmin, ActorName: "cli:" + name}
	cfg := &api.Config{Engine: client, Auth: auth.NewStore(db, d.Dialect(), auth.AuditedTxOf(mdb, client)),
		Authenticate: func(*http.Request) (*auth.Principal, error) { return p, nil }}
	h, err := api.NewHandler(cfg)
	if err != nil {
		return err
	}
	// The events and reconciliation routes too (keel events, recon,
	// approvals), built on their first request only: the other verbs work
	// on a database without the events and reconciliation lines, and do
	// not start an events backbone. The business modules' routes need their
	// module running and stay with --server (WithRemoteAPI).
	var eh http.Handler
	var stopWebs func()
	defer func() {
		if stopWebs != nil {
			stopWebs()
		}
	}()
	return f(ctx, &APIClient{do: func(r *http.Request) (*http.Response, error) {
		serve := http.Handler(h)
		if localEventsRoute(r.URL.Path) {
			if eh == nil {
				webs, stop, err := localWebs(ctx, mdb, client)
				if err != nil {
					return nil, fmt.Errorf("opening the events and reconciliation records (is the database migrated? keel migrate up): %w", err)
				}
				stopWebs = stop
				withWebs := *cfg
				withWebs.Modules = webs
				if eh, err = api.NewHandler(&withWebs); err != nil {
					return nil, err
				}
			}
			serve = eh
		}
		rec := httptest.NewRecorder()
		serve.ServeHTTP(rec, r)
		return rec.Result(), nil
	}})
}

// EnvToken is the environment variable holding the token for --server.
const EnvToken = "KEEL_TOKEN"

// TokenFromEnv reads KEEL_TOKEN.
func TokenFromEnv() string { return os.Getenv(EnvToken) }

func jsonOut(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
