-- Several events in one statement (EmitManyTx): one round trip for a
-- batch of business facts committed together.

-- name: OutboxInsertMany
-- $1..$8 are parallel arrays (topic, id, key, type, partition, payload,
-- headers, digest), in emit order; rows are inserted in that order so that
-- seq keeps it. Ids already in the outbox or its archive are not written
-- and not returned (the caller compares their digests). The notification
-- on channel $10 is sent once, and only when a row was written: an
-- uncorrelated subquery is evaluated at most once, when the first
-- returned row is projected.
WITH ins AS (
    INSERT INTO keel_events_outbox (topic, event_id, event_key, event_type, part, payload, headers, digest, emitted_at)
    SELECT u.topic, u.id, u.key, u.typ, u.part, u.payload, u.headers, u.digest, $9
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::integer[], $6::text[], $7::text[], $8::text[])
         WITH ORDINALITY AS u(topic, id, key, typ, part, payload, headers, digest, ord)
    WHERE NOT EXISTS (SELECT 1 FROM keel_events_archive a WHERE a.topic = u.topic AND a.event_id = u.id)
    ORDER BY u.ord
    ON CONFLICT (topic, event_id) DO NOTHING
    RETURNING topic, event_id)
SELECT ins.topic, ins.event_id, (SELECT pg_notify($10::text, '')) IS NULL FROM ins;
