-- Several events in one statement (EmitManyTx): one call for a batch of
-- business facts committed together.

-- name: OutboxInsertMany
-- ?1 is a JSON array of [topic, id, key, type, partition, payload,
-- headers, digest] in emit order; rows are inserted in that order so that
-- seq keeps it. Ids already in the outbox or its archive are not written
-- and not returned (the caller compares their digests).
INSERT INTO keel_events_outbox (topic, event_id, event_key, event_type, part, payload, headers, digest, emitted_at)
SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]'),
       json_extract(j.value, '$[3]'), json_extract(j.value, '$[4]'), json_extract(j.value, '$[5]'),
       json_extract(j.value, '$[6]'), json_extract(j.value, '$[7]'), ?2
FROM json_each(?1) AS j
WHERE NOT EXISTS (SELECT 1 FROM keel_events_archive a
                  WHERE a.topic = json_extract(j.value, '$[0]') AND a.event_id = json_extract(j.value, '$[1]'))
ORDER BY j.key
ON CONFLICT (topic, event_id) DO NOTHING
RETURNING topic, event_id;
