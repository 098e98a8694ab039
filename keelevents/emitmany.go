package keelevents

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	"github.com/keelwork/keel/keelsql"
)

// MaxEmitMany bounds the events one EmitManyTx writes.
const MaxEmitMany = 10_000

// EmitManyTx is EmitTx for several events in one statement: a batch of
// business facts committed in one transaction (a coalesced run of stock
// reservations) costs one round trip for its events, not one each. The
// events are written in slice order, so events of one key keep their
// order. Each event obeys EmitTx's rules: all are validated before
// anything is written (ErrInvalid), an id already emitted on its topic
// with the same payload is a no-op, with another payload ErrConflict. Two
// events with the same topic and id in one call are ErrInvalid.
func (e *Events[TTx]) EmitManyTx(ctx context.Context, tx keelsql.Tx[TTx], evs []Event) error {
	if len(evs) == 0 {
		return nil
	}
	if len(evs) > MaxEmitMany {
		return invalid("at most %d events in one call, got %d", MaxEmitMany, len(evs))
	}
	type row struct {
		topic, id, key, typ, payload, headers, digest string
		part                                          int
	}
	rows := make([]row, len(evs))
	seen := make(map[[2]string]int, len(evs))
	for i := range evs {
		ev := evs[i]
		if err := ValidateEvent(&ev); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		k := [2]string{ev.Topic, ev.ID}
		if j, dup := seen[k]; dup {
			return invalid("events %d and %d are both %s/%s", j, i, ev.Topic, ev.ID)
		}
		seen[k] = i
		var buf bytes.Buffer
		if err := json.Compact(&buf, ev.Payload); err != nil {
			return invalid("event %d: payload: %v", i, err)
		}
		rows[i] = row{topic: ev.Topic, id: ev.ID, key: ev.Key, typ: cmp.Or(ev.Type, ev.Topic), payload: buf.String(),
			headers: encodeHeaders(ev.Headers), digest: Digest(buf.Bytes())}
	}
	parts, err := e.partitions(ctx, tx)
	if err != nil {
		return err
	}
	for i := range rows {
		rows[i].part = PartitionOf(rows[i].key, parts)
	}
	var rs keelsql.Rows
	if e.d.pg {
		n := len(rows)
		topics, ids, keys, types := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		payloads, headers, digests, ps := make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
		for i, r := range rows {
			topics[i], ids[i], keys[i], types[i] = r.topic, r.id, r.key, r.typ
			payloads[i], headers[i], digests[i], ps[i] = r.payload, r.headers, r.digest, int64(r.part)
		}
		rs, err = tx.Query(ctx, e.d.sql("OutboxInsertMany"), keelsql.ArrayOf(topics), keelsql.ArrayOf(ids),
			keelsql.ArrayOf(keys), keelsql.ArrayOf(types), keelsql.ArrayOf(ps), keelsql.ArrayOf(payloads),
			keelsql.ArrayOf(headers), keelsql.ArrayOf(digests), now(), e.notifyChannel())
	} else {
		list := make([][]any, len(rows))
		for i, r := range rows {
			list[i] = []any{r.topic, r.id, r.key, r.typ, r.part, r.payload, r.headers, r.digest}
		}
		b, merr := json.Marshal(list)
		if merr != nil {
			return fmt.Errorf("encoding events: %w", merr)
		}
		rs, err = tx.Query(ctx, e.d.sql("OutboxInsertMany"), string(b), now())
	}
	if err != nil {
		return fmt.Errorf("writing %d events: %w", len(rows), err)
	}
	written := make(map[[2]string]bool, len(rows))
	for rs.Next() {
		var k [2]string
		dest := []any{&k[0], &k[1]}
		if e.d.pg {
			var notified bool
			dest = append(dest, &notified)
		}
		if err := rs.Scan(dest...); err != nil {
			rs.Close()
			return fmt.Errorf("writing %d events: %w", len(rows), err)
		}
		written[k] = true
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return fmt.Errorf("writing %d events: %w", len(rows), err)
	}
	if len(written) > 0 {
		e.m.emitted.Add(float64(len(written)))
		if !e.listening.Load() {
			e.kickRelay()
		}
	}
	if len(written) == len(rows) {
		return nil
	}
	// The ids not written were emitted before: the same payload is a
	// no-op, another one a conflict, as for EmitTx.
	for _, r := range rows {
		if written[[2]string{r.topic, r.id}] {
			continue
		}
		var existing string
		if err := tx.QueryRow(ctx, e.d.sql("OutboxDigest"), r.topic, r.id).Scan(&existing); err != nil {
			return fmt.Errorf("reading event %s/%s: %w", r.topic, r.id, err)
		}
		if existing != r.digest {
			e.m.conflicts.Inc()
			return fmt.Errorf("%w: %s/%s", ErrConflict, r.topic, r.id)
		}
	}
	return nil
}
