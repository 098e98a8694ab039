package keelevents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
)

// TopicStats is one topic's outbox, as operators see it.
type TopicStats struct {
	Topic string
	// Backlog is how many events wait to be published.
	Backlog int64
	// OldestUnpublished is the emit time of the oldest of them (nil when
	// none waits).
	OldestUnpublished *time.Time
	// Published counts the events published and still in the outbox;
	// Archived those already summarized in the archive.
	Published, Archived int64
	// Attempts counts publish attempts; Unknown those whose outcome was
	// unknown (each republished with the same id).
	Attempts, Unknown int64
}

// TopicStats returns the outbox per topic, by topic.
func (e *Events[TTx]) TopicStats(ctx context.Context) ([]TopicStats, error) {
	byTopic := map[string]*TopicStats{}
	get := func(t string) *TopicStats {
		if byTopic[t] == nil {
			byTopic[t] = &TopicStats{Topic: t}
		}
		return byTopic[t]
	}
	rows, err := e.db.Query(ctx, e.d.sql("OutboxTopicStats"))
	_, err = keelsql.CollectRows(rows, err, func(r keelsql.Rows) (struct{}, error) {
		var t string
		var s TopicStats
		if err := r.Scan(&t, &s.Backlog, &s.OldestUnpublished, &s.Published, &s.Attempts, &s.Unknown); err != nil {
			return struct{}{}, err
		}
		g := get(t)
		g.Backlog, g.OldestUnpublished, g.Published = s.Backlog, s.OldestUnpublished, s.Published
		g.Attempts += s.Attempts
		g.Unknown += s.Unknown
		return struct{}{}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading outbox stats: %w", err)
	}
	rows, err = e.db.Query(ctx, e.d.sql("ArchiveTopicStats"))
	_, err = keelsql.CollectRows(rows, err, func(r keelsql.Rows) (struct{}, error) {
		var t string
		var n, attempts, unknown int64
		if err := r.Scan(&t, &n, &attempts, &unknown); err != nil {
			return struct{}{}, err
		}
		g := get(t)
		g.Archived, g.Attempts, g.Unknown = n, g.Attempts+attempts, g.Unknown+unknown
		return struct{}{}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading archive stats: %w", err)
	}
	out := make([]TopicStats, 0, len(byTopic))
	for _, t := range slices.Sorted(maps.Keys(byTopic)) {
		s := byTopic[t]
		if s.OldestUnpublished != nil {
			u := s.OldestUnpublished.UTC()
			s.OldestUnpublished = &u
		}
		out = append(out, *s)
	}
	return out, nil
}

// ConsumerStats is one inbox consumer, as operators see it.
type ConsumerStats struct {
	Name        string
	Topics      []string
	Ordered     bool
	MaxAttempts int
	CreatedAt   time.Time
	// Lag is how many events emitted on its topics since it was created
	// are not in its inbox yet (archived events are not counted);
	// OldestUnacked the emit time of the oldest of them.
	Lag           int64
	OldestUnacked *time.Time
	// Applied, Duplicates (redeliveries absorbed), Quarantined (same id,
	// other payload) and Manual (waiting for an operator).
	Applied, Duplicates, Quarantined, Manual int64
}

// ConsumerStats returns every consumer ever registered, by name.
func (e *Events[TTx]) ConsumerStats(ctx context.Context) ([]ConsumerStats, error) {
	rows, err := e.db.Query(ctx, e.d.sql("ConsumerList"))
	list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (ConsumerStats, error) {
		var s ConsumerStats
		var topics string
		if err := r.Scan(&s.Name, &topics, &s.Ordered, &s.MaxAttempts, &s.CreatedAt, &s.Duplicates); err != nil {
			return s, err
		}
		s.CreatedAt = s.CreatedAt.UTC()
		return s, json.Unmarshal([]byte(topics), &s.Topics)
	})
	if err != nil {
		return nil, fmt.Errorf("reading consumers: %w", err)
	}
	counts := func(name string) (map[string]int64, error) {
		rows, err := e.db.Query(ctx, e.d.sql(name))
		m := map[string]int64{}
		_, err = keelsql.CollectRows(rows, err, func(r keelsql.Rows) (struct{}, error) {
			var c string
			var n int64
			err := r.Scan(&c, &n)
			m[c] = n
			return struct{}{}, err
		})
		return m, err
	}
	appliedN, err := counts("InboxCounts")
	if err != nil {
		return nil, fmt.Errorf("counting inbox rows: %w", err)
	}
	quarantinedN, err := counts("QuarantineCounts")
	if err != nil {
		return nil, fmt.Errorf("counting quarantined events: %w", err)
	}
	manualN, err := counts("ManualCounts")
	if err != nil {
		return nil, fmt.Errorf("counting manual events: %w", err)
	}
	for i := range list {
		s := &list[i]
		s.Applied, s.Quarantined, s.Manual = appliedN[s.Name], quarantinedN[s.Name], manualN[s.Name]
		for _, p := range s.Topics {
			exact, like := p, ""
			if prefix, ok := strings.CutSuffix(p, ".>"); ok {
				exact, like = "", likeEscape(prefix)+".%"
			}
			var n int64
			var oldest *time.Time
			if err := e.db.QueryRow(ctx, e.d.sql("InboxLag"), s.Name, exact, like, s.CreatedAt).Scan(&n, &oldest); err != nil {
				return nil, fmt.Errorf("measuring the lag of %s: %w", s.Name, err)
			}
			s.Lag += n
			if oldest != nil && (s.OldestUnacked == nil || oldest.Before(*s.OldestUnacked)) {
				u := oldest.UTC()
				s.OldestUnacked = &u
			}
		}
	}
	return list, nil
}

// likeEscape escapes LIKE's wildcards ('_' may appear in topics).
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `_`, `\_`, `%`, `\%`).Replace(s)
}

// ListParams pages operator lists.
type ListParams struct {
	// Consumer filters by consumer ("" for all).
	Consumer string
	// State filters manual events: "manual" (waiting), "replayed", or ""
	// for both.
	State string
	// After returns items with an id greater than it (the last id of the
	// previous page).
	After int64
	// Limit bounds the page (default 50, at most 500).
	Limit int
}

func (p *ListParams) check() error {
	if p.Consumer != "" {
		if err := ValidateConsumer(p.Consumer); err != nil {
			return err
		}
	}
	if p.State != "" && p.State != "manual" && p.State != "replayed" {
		return invalid("state must be manual or replayed, got %q", p.State)
	}
	if p.Limit < 0 || p.Limit > 500 || p.After < 0 {
		return invalid("limit must be 0..500 and after non-negative")
	}
	p.Limit = cmp.Or(p.Limit, 50)
	return nil
}

// Quarantined is an event a consumer received with the id of one it had
// applied but another payload: both payloads, never applied.
type Quarantined struct {
	ID                       int64
	Consumer, Topic, EventID string
	Key                      string
	AppliedDigest            string
	AppliedPayload           json.RawMessage
	Digest                   string
	Payload                  json.RawMessage
	// Seen counts its deliveries.
	Seen int
	At   time.Time
}

// ListQuarantine lists quarantined events, oldest first.
func (e *Events[TTx]) ListQuarantine(ctx context.Context, p ListParams) ([]Quarantined, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	rows, err := e.db.Query(ctx, e.d.sql("QuarantineList"), p.Consumer, p.After, p.Limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Quarantined, error) {
		var q Quarantined
		var ap, pl string
		err := r.Scan(&q.ID, &q.Consumer, &q.Topic, &q.EventID, &q.Key, &q.AppliedDigest, &ap, &q.Digest, &pl, &q.Seen, &q.At)
		q.AppliedPayload, q.Payload, q.At = json.RawMessage(ap), json.RawMessage(pl), q.At.UTC()
		return q, err
	})
}

// ManualEvent is an event whose handler failed past its budget.
type ManualEvent struct {
	ID       int64
	Consumer string
	Message  Message
	Attempts int
	// LastError is the handler's last error.
	LastError string
	// State is "manual" (waiting for an operator) or "replayed".
	State      string
	At         time.Time
	ReplayedAt *time.Time
}

func scanManual(r keelsql.Row) (ManualEvent, error) {
	var m ManualEvent
	var payload, headers string
	err := r.Scan(&m.ID, &m.Consumer, &m.Message.Topic, &m.Message.ID, &m.Message.Key, &m.Message.Type,
		&m.Message.Partition, &payload, &headers, &m.Message.Digest, &m.Message.EmittedAt, &m.Attempts,
		&m.LastError, &m.State, &m.At, &m.ReplayedAt)
	if err != nil {
		return m, err
	}
	m.Message.Payload = []byte(payload)
	m.Message.EmittedAt, m.At = m.Message.EmittedAt.UTC(), m.At.UTC()
	m.Message.Headers, err = decodeHeaders(headers)
	return m, err
}

// ListManual lists manual events, oldest first.
func (e *Events[TTx]) ListManual(ctx context.Context, p ListParams) ([]ManualEvent, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	rows, err := e.db.Query(ctx, e.d.sql("ManualList"), p.Consumer, p.State, p.After, p.Limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (ManualEvent, error) { return scanManual(r) })
}

// GetManual returns one manual event.
func (e *Events[TTx]) GetManual(ctx context.Context, id int64) (*ManualEvent, error) {
	m, err := scanManual(e.db.QueryRow(ctx, e.d.sql("ManualGet"), id))
	if errors.Is(err, keelsql.ErrNoRows) {
		return nil, fmt.Errorf("%w: manual event %d", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("reading manual event %d: %w", id, err)
	}
	return &m, nil
}

// EventDetail is everything known of one event: the outbox row (or its
// archive summary, without payload), and what each consumer did with it.
type EventDetail struct {
	Topic, ID, Key, Type string
	Partition            int
	Digest               string
	// Payload and Headers are nil once the event is archived.
	Payload     json.RawMessage
	Headers     map[string]string
	EmittedAt   time.Time
	PublishedAt *time.Time
	Attempts    int
	Unknown     int
	Archived    bool
	ArchivedAt  *time.Time
	Inbox       []InboxEntry
	Manual      []ManualRef
}

// InboxEntry is one consumer's inbox row for an event.
type InboxEntry struct {
	Consumer string
	Digest   string
	// State is "applied" or "manual".
	State    string
	Attempts int
	At       time.Time
}

// ManualRef points at a manual event of the event.
type ManualRef struct {
	ID       int64
	Consumer string
	State    string
}

// GetEvent returns what is known of topic/id: ErrNotFound if neither the
// outbox nor the archive has it.
func (e *Events[TTx]) GetEvent(ctx context.Context, topic, id string) (*EventDetail, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	d := &EventDetail{Topic: topic, ID: id}
	var seq int64
	var payload, headers string
	err := e.db.QueryRow(ctx, e.d.sql("OutboxGet"), topic, id).Scan(&seq, &d.Topic, &d.ID, &d.Key, &d.Type,
		&d.Partition, &payload, &headers, &d.Digest, &d.EmittedAt, &d.PublishedAt, &d.Attempts, &d.Unknown)
	switch {
	case err == nil:
		d.Payload = json.RawMessage(payload)
		if d.Headers, err = decodeHeaders(headers); err != nil {
			return nil, err
		}
	case errors.Is(err, keelsql.ErrNoRows):
		var published time.Time
		var archived time.Time
		err = e.db.QueryRow(ctx, e.d.sql("ArchiveGet"), topic, id).Scan(&d.Key, &d.Type, &d.Digest, &d.Partition,
			&d.EmittedAt, &published, &d.Attempts, &d.Unknown, &archived)
		if errors.Is(err, keelsql.ErrNoRows) {
			return nil, fmt.Errorf("%w: event %s/%s", ErrNotFound, topic, id)
		}
		if err != nil {
			return nil, fmt.Errorf("reading archived event %s/%s: %w", topic, id, err)
		}
		published, archived = published.UTC(), archived.UTC()
		d.PublishedAt, d.ArchivedAt, d.Archived = &published, &archived, true
	default:
		return nil, fmt.Errorf("reading event %s/%s: %w", topic, id, err)
	}
	d.EmittedAt = d.EmittedAt.UTC()
	if d.PublishedAt != nil {
		u := d.PublishedAt.UTC()
		d.PublishedAt = &u
	}
	rows, err := e.db.Query(ctx, e.d.sql("InboxByEvent"), topic, id)
	d.Inbox, err = keelsql.CollectRows(rows, err, func(r keelsql.Rows) (InboxEntry, error) {
		var i InboxEntry
		err := r.Scan(&i.Consumer, &i.Digest, &i.State, &i.Attempts, &i.At)
		i.At = i.At.UTC()
		return i, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading inbox rows of %s/%s: %w", topic, id, err)
	}
	rows, err = e.db.Query(ctx, e.d.sql("ManualByEvent"), topic, id)
	d.Manual, err = keelsql.CollectRows(rows, err, func(r keelsql.Rows) (ManualRef, error) {
		var m ManualRef
		return m, r.Scan(&m.ID, &m.Consumer, &m.State)
	})
	if err != nil {
		return nil, fmt.Errorf("reading manual events of %s/%s: %w", topic, id, err)
	}
	return d, nil
}

// ArchivedEvent is the summary of an archived event.
type ArchivedEvent struct {
	Topic, ID, Key, Type, Digest string
	EmittedAt, PublishedAt       time.Time
}

// ListArchive returns the archive summaries of topic emitted in [from,
// to), by emit time: what a reconciler compares with its own records.
func (e *Events[TTx]) ListArchive(ctx context.Context, topic string, from, to time.Time, limit int) ([]ArchivedEvent, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 10000 {
		return nil, invalid("limit must be 1..10000")
	}
	rows, err := e.db.Query(ctx, e.d.sql("ArchiveList"), topic, from.UTC(), to.UTC(), limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (ArchivedEvent, error) {
		var a ArchivedEvent
		err := r.Scan(&a.Topic, &a.ID, &a.Key, &a.Type, &a.Digest, &a.EmittedAt, &a.PublishedAt)
		a.EmittedAt, a.PublishedAt = a.EmittedAt.UTC(), a.PublishedAt.UTC()
		return a, err
	})
}

// Replay runs the handler of a manual event again, with its original
// event id and payload, in one transaction with the inbox row's move to
// applied and the audit entry (action "events.replay"; the actor comes
// from ctx as for every audited action). A failing replay leaves the event
// manual, records the error and audits "events.replay_failed". The
// consumer must be registered in this process.
func (e *Events[TTx]) Replay(ctx context.Context, manualID int64, reason string) error {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return invalid("a replay needs a reason")
	}
	if manualID <= 0 {
		return invalid("manual event id must be positive")
	}
	e.mu.Lock()
	client := e.client
	e.mu.Unlock()
	if client == nil {
		return errors.New("keelevents: Replay needs Start with an engine client (for the audit log)")
	}
	m, err := e.GetManual(ctx, manualID)
	if err != nil {
		return err
	}
	if m.State != "manual" {
		return fmt.Errorf("%w: manual event %d was already replayed", ErrNotFound, manualID)
	}
	e.mu.Lock()
	c := e.consumers[m.Consumer]
	e.mu.Unlock()
	if c == nil {
		return fmt.Errorf("%w: consumer %s (manual event %d stays manual)", ErrNotRegistered, m.Consumer, manualID)
	}
	audit := keel.Audit{Action: "events.replay", Target: fmt.Sprintf("events/manual/%d", manualID), Reason: reason,
		Context: map[string]any{"consumer": m.Consumer, "topic": m.Message.Topic, "event_id": m.Message.ID, "digest": m.Message.Digest}}
	d := &Delivery{Message: m.Message, Attempt: m.Attempts + 1}
	err = e.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		n, err := tx.Exec(ctx, e.d.sql("ManualReplayed"), manualID, now())
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: manual event %d was replayed meanwhile", ErrNotFound, manualID)
		}
		if _, err := tx.Exec(ctx, e.d.sql("InboxReplayed"), m.Consumer, m.Message.Topic, m.Message.ID, d.Attempt, now()); err != nil {
			return err
		}
		if err := c.apply(ctx, tx, []*Delivery{d}); err != nil {
			return &handlerError{err}
		}
		return client.AuditRecordTx(ctx, tx.Native(), audit)
	})
	var herr *handlerError
	if errors.As(err, &herr) {
		ferr := e.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
			if _, err := tx.Exec(ctx, e.d.sql("ManualReplayFailed"), manualID, truncate(herr.err.Error(), 2000)); err != nil {
				return err
			}
			audit.Action = "events.replay_failed"
			audit.Context["error"] = truncate(herr.err.Error(), 500)
			return client.AuditRecordTx(ctx, tx.Native(), audit)
		})
		return errors.Join(fmt.Errorf("replaying manual event %d: %w: %w", manualID, ErrReplayFailed, herr.err), ferr)
	}
	if err != nil {
		return fmt.Errorf("replaying manual event %d: %w", manualID, err)
	}
	e.m.replayed.WithLabelValues(m.Consumer).Inc()
	return nil
}

type handlerError struct{ err error }

func (h *handlerError) Error() string { return h.err.Error() }
func (h *handlerError) Unwrap() error { return h.err }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
