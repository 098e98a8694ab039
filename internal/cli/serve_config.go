package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel/server"
	"github.com/keelwork/keel/server/auth"
)

// Setting is one `keel serve` setting: a flag, an environment variable and
// a key of the optional JSON config file. Precedence: flag, then
// environment, then file, then the default. docs/operations.md lists them.
type Setting struct {
	Name    string // flag name and config file key
	Env     string
	Default string
	Help    string
}

// ServeSettings are all settings of `keel serve` (and, with their own
// defaults, `keel dev`).
var ServeSettings = []Setting{
	{"database-url", "KEEL_DATABASE_URL", "", "postgres://… or sqlite:PATH"},
	{"schema", "KEEL_SCHEMA", "", "PostgreSQL schema for Keel's tables"},
	{"addr", "KEEL_ADDR", server.DefaultAddr, "listen address (host:port; port 0 picks one)"},
	{"queues", "KEEL_QUEUES", "default=100", "queues this instance works, name=max_workers,… (only with workers, e.g. --demo)"},
	{"demo", "KEEL_DEMO", "false", "run the demo job kinds and demo orders"},
	{"migrate", "KEEL_MIGRATE", "true", "apply pending migrations (engine and server lines) at start"},
	{"shutdown-timeout", "KEEL_SHUTDOWN_TIMEOUT", "30s", "how long shutdown waits for running jobs before cancelling and handing them back"},
	{"session-ttl", "KEEL_SESSION_TTL", server.DefaultSessionTTL.String(), "console login lifetime"},
	{"cookie-secure", "KEEL_COOKIE_SECURE", "true", "mark the session cookie Secure (false only for plain-HTTP local use)"},
	{"sample-interval", "KEEL_SAMPLE_INTERVAL", server.DefaultSampleInterval.String(), "how often the console samples for its charts"},
	{"log-level", "KEEL_LOG_LEVEL", "info", "debug, info, warn or error"},
	natsURLSetting,
	{"events-retention", "KEEL_EVENTS_RETENTION", "168h", "how long published events keep their payload before the archive keeps only their summary (at least 1h)"},
	{"modules", "KEEL_MODULES", "all", "business modules to run: all, none, or a comma-separated list (reservation, delivery); an empty --modules also means none"},
	{"module-settings", "KEEL_MODULE_SETTINGS", "", "module settings, module.key=value,… (each module's guide in docs/ lists its keys)"},
}

// ServeOpts are the resolved settings.
type ServeOpts struct {
	DatabaseURL     string
	Schema          string
	Addr            string
	Queues          map[string]int
	Demo            bool
	Migrate         bool
	ShutdownTimeout time.Duration
	SessionTTL      time.Duration
	CookieSecure    bool
	SampleInterval  time.Duration
	LogLevel        string
	// NATSURL, if set, carries events on that NATS server's JetStream
	// instead of the database (keel dev sets its embedded server's).
	NATSURL string
	// EventsRetention is the events outbox's horizon (keelevents
	// Config.Retention).
	EventsRetention time.Duration
	Modules         []string
	ModuleSettings  map[string]string
	// Ready, if set, is called once the server listens (embedders and
	// tests reach the running server through it).
	Ready func(srv *server.Server, store *auth.Store)
}

// ResolveServe merges the config file (if any), the environment and the
// flags that were set, over the defaults.
func ResolveServe(file string, env func(string) string, flags map[string]string) (*ServeOpts, error) {
	vals := map[string]string{}
	for _, s := range ServeSettings {
		vals[s.Name] = s.Default
	}
	if file != "" {
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading config file: %w", err)
		}
		var fromFile map[string]any
		if err := json.Unmarshal(raw, &fromFile); err != nil {
			return nil, fmt.Errorf("config file %s: %w", file, err)
		}
		for k, v := range fromFile {
			if _, ok := vals[k]; !ok {
				return nil, fmt.Errorf("config file %s: unknown setting %q", file, k)
			}
			vals[k] = fmt.Sprint(v)
		}
	}
	for _, s := range ServeSettings {
		if v := env(s.Env); v != "" {
			vals[s.Name] = v
		}
		if v, ok := flags[s.Name]; ok {
			vals[s.Name] = v
		}
	}
	return parseServe(vals)
}

func parseServe(v map[string]string) (*ServeOpts, error) {
	o := &ServeOpts{DatabaseURL: v["database-url"], Schema: v["schema"], Addr: v["addr"], LogLevel: v["log-level"]}
	var err error
	bools := []struct {
		name string
		dst  *bool
	}{{"demo", &o.Demo}, {"migrate", &o.Migrate}, {"cookie-secure", &o.CookieSecure}}
	for _, b := range bools {
		if *b.dst, err = strconv.ParseBool(v[b.name]); err != nil {
			return nil, fmt.Errorf("setting %s: want true or false, got %q", b.name, v[b.name])
		}
	}
	durs := []struct {
		name string
		dst  *time.Duration
	}{{"shutdown-timeout", &o.ShutdownTimeout}, {"session-ttl", &o.SessionTTL}, {"sample-interval", &o.SampleInterval},
		{"events-retention", &o.EventsRetention}}
	for _, d := range durs {
		if *d.dst, err = time.ParseDuration(v[d.name]); err != nil || *d.dst <= 0 {
			return nil, fmt.Errorf("setting %s: want a positive duration like 30s, got %q", d.name, v[d.name])
		}
	}
	if o.EventsRetention < time.Hour {
		return nil, fmt.Errorf("setting events-retention: want at least 1h (consumers and reconciliation read published events that long), got %q", v["events-retention"])
	}
	if o.NATSURL, err = parseNATSURL(v["nats-url"]); err != nil {
		return nil, err
	}
	if o.Queues, err = parseQueues(v["queues"]); err != nil {
		return nil, err
	}
	if o.Modules, err = parseModules(v["modules"]); err != nil {
		return nil, err
	}
	if o.ModuleSettings, err = ParseModuleSettings(v["module-settings"]); err != nil {
		return nil, err
	}
	switch o.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return nil, fmt.Errorf("setting log-level: want debug, info, warn or error, got %q", o.LogLevel)
	}
	return o, nil
}

func parseQueues(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		name, n, ok := strings.Cut(part, "=")
		workers, err := strconv.Atoi(n)
		if !ok || err != nil || workers < 1 {
			return nil, fmt.Errorf("setting queues: want name=max_workers,…, got %q", part)
		}
		out[name] = workers
	}
	return out, nil
}

// SettingsTable renders ServeSettings as a Markdown table (docs).
func SettingsTable() string {
	var b strings.Builder
	b.WriteString("| flag / file key | environment | default | meaning |\n| --- | --- | --- | --- |\n")
	for _, s := range ServeSettings {
		fmt.Fprintf(&b, "| `--%s` / `%s` | `%s` | `%s` | %s |\n", s.Name, s.Name, s.Env, s.Default, s.Help)
	}
	return b.String()
}
