package keelpgx

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keeldriver"
)

// maxChannelLen is PostgreSQL's identifier limit (NAMEDATALEN-1); pg_notify
// rejects longer channel names and LISTEN would truncate them.
const maxChannelLen = 63

// channelName maps a topic to the channel of namespace ns (the schema), so
// installs in different schemas of one database never cross-talk. Names too
// long for an identifier are replaced by a hash of the same input.
func channelName(ns, topic string) string {
	name := ns + "." + topic
	if len(name) <= maxChannelLen {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "keel_" + hex.EncodeToString(sum[:20])
}

// channel returns the channel of topic, resolving the namespace from
// current_schema() the first time when Config.Schema is empty.
func (d *Driver) channel(ctx context.Context, topic string) (string, error) {
	d.nsMu.Lock()
	defer d.nsMu.Unlock()
	if d.channelNS == "" {
		var schema string
		if err := d.pool.QueryRow(ctx, sqlCurrentSchema).Scan(&schema); err != nil {
			return "", fmt.Errorf("keelpgx: resolving notification namespace: %w", err)
		}
		d.channelNS = cmp.Or(schema, "keel")
	}
	return channelName(d.channelNS, topic), nil
}

// listener holds one dedicated connection (LISTEN state is per session, so
// a pooled connection cannot be used). Like pgx.Conn it is not safe for
// concurrent use: the caller cancels WaitForNotification before Listen,
// Unlisten or Close.
type listener struct {
	d        *Driver
	conn     *pgx.Conn
	channels map[string]string // channel -> topic
}

var _ keeldriver.Listener = (*listener)(nil)

// Connect opens the dedicated connection with the pool's settings (and so
// its search_path).
func (l *listener) Connect(ctx context.Context) error {
	if l.d.closed.Load() {
		return keeldriver.ErrClosed
	}
	if l.conn != nil {
		return errors.New("keelpgx: listener already connected")
	}
	conn, err := pgx.ConnectConfig(ctx, l.d.listenCfg.Copy())
	if err != nil {
		return fmt.Errorf("keelpgx: connecting listener: %w", err)
	}
	l.conn = conn
	return nil
}

func (l *listener) connected() error {
	if l.conn == nil {
		return errors.New("keelpgx: listener not connected")
	}
	return nil
}

// Listen subscribes to topic. LISTEN takes no parameters, so the channel is
// quoted as an identifier.
func (l *listener) Listen(ctx context.Context, topic string) error {
	return l.command(ctx, "LISTEN", topic, func(channel string) { l.channels[channel] = topic })
}

// Unlisten unsubscribes from topic.
func (l *listener) Unlisten(ctx context.Context, topic string) error {
	return l.command(ctx, "UNLISTEN", topic, func(channel string) { delete(l.channels, channel) })
}

func (l *listener) command(ctx context.Context, verb, topic string, record func(channel string)) error {
	if err := l.connected(); err != nil {
		return err
	}
	channel, err := l.d.channel(ctx, topic)
	if err != nil {
		return err
	}
	if _, err := l.conn.Exec(ctx, verb+" "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("keelpgx: %s %s: %w", verb, topic, err)
	}
	record(channel)
	return nil
}

// WaitForNotification returns the next notification on a listened topic.
// Notifications for a channel unlistened meanwhile are dropped.
func (l *listener) WaitForNotification(ctx context.Context) (*keeldriver.Notification, error) {
	if err := l.connected(); err != nil {
		return nil, err
	}
	for {
		n, err := l.conn.WaitForNotification(ctx)
		if err != nil {
			return nil, fmt.Errorf("keelpgx: waiting for notification: %w", err)
		}
		if topic, ok := l.channels[n.Channel]; ok {
			return &keeldriver.Notification{Topic: topic, Payload: n.Payload}, nil
		}
	}
}

// Close closes the connection; closing an unconnected listener is a no-op.
func (l *listener) Close(ctx context.Context) error {
	if l.conn == nil {
		return nil
	}
	err := l.conn.Close(ctx)
	l.conn = nil
	clear(l.channels)
	if err != nil {
		return fmt.Errorf("keelpgx: closing listener: %w", err)
	}
	return nil
}
