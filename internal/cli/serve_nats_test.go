package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelevents/jetstream/jstest"
	"github.com/keelwork/keel/keelsql"
)

func TestNATSURLSetting(t *testing.T) {
	t.Parallel()
	env := func(k string) string {
		if k == "KEEL_NATS_URL" {
			return "nats://10.0.0.1:4222,nats://10.0.0.2:4222"
		}
		return ""
	}
	o, err := ResolveServe("", env, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.NATSURL != "nats://10.0.0.1:4222,nats://10.0.0.2:4222" {
		t.Fatalf("from the environment: %q", o.NATSURL)
	}
	o, err = ResolveServe("", env, map[string]string{"nats-url": "tls://broker:4222"})
	if err != nil || o.NATSURL != "tls://broker:4222" {
		t.Fatalf("the flag wins: %q %v", o.NATSURL, err)
	}
	for _, bad := range []string{"http://x:4222", "broker", "nats://"} {
		if _, err := ResolveServe("", func(string) string { return "" }, map[string]string{"nats-url": bad}); err == nil ||
			!strings.Contains(err.Error(), "nats-url") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if o, err := ResolveServe("", func(string) string { return "" }, nil); err != nil || o.NATSURL != "" {
		t.Fatalf("default: %q %v (the database carries events)", o.NATSURL, err)
	}
}

func TestEventsBusSelection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := testdb.NewSQLite(t)
	db := keelsql.SQLite(d.DB())
	var out bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&out, nil))
	b, err := eventsBus(ctx, &ServeOpts{}, db, 8, logger)
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != "database" {
		t.Errorf("without nats-url: bus %q, want database", b.Name())
	}
	_ = b.Close()

	url := jstest.Embedded(t)
	b, err = eventsBus(ctx, &ServeOpts{NATSURL: url}, db, 8, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Name() != "jetstream" || !strings.Contains(out.String(), "events on NATS JetStream") {
		t.Errorf("with nats-url: bus %q, printed %q", b.Name(), out.String())
	}

	// A server that does not answer is a sentence at start, not a hang.
	_, err = eventsBus(ctx, &ServeOpts{NATSURL: "nats://127.0.0.1:1"}, db, 8, logger)
	if err == nil || !strings.Contains(err.Error(), "events on NATS JetStream") {
		t.Errorf("unreachable server: %v", err)
	}
}

func TestDevNATSPortAndStore(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	var out bytes.Buffer
	s, err := startDevNATS(dir, port, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	want := fmt.Sprintf("nats://127.0.0.1:%d", port)
	if s.URL() != want || !strings.Contains(out.String(), want) || !strings.Contains(out.String(), filepath.Join(dir, "nats")) {
		t.Fatalf("url %s, printed %q; want %s and the store under %s", s.URL(), out.String(), want, dir)
	}
	// A second server on the same port is a sentence, not a hang.
	if _, err := startDevNATS(t.TempDir(), port, &out); err == nil {
		t.Fatal("a second embedded server started on a port in use")
	}
}
