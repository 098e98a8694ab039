-- name: VersionNext
-- Every change to the source takes the next data version in its own
-- transaction; the row lock orders the writers.
UPDATE export_data_version SET version = version + 1 WHERE id = 1 RETURNING version;

-- name: VersionCurrent
SELECT version FROM export_data_version WHERE id = 1;

-- name: OrderInsert
INSERT INTO export_orders (tenant, order_no, customer, amount_minor, currency, status, created_at, valid_from)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id;

-- name: OrderClose
-- Closing a version is how an update or delete leaves every earlier cut
-- untouched: the row stays, visible to cuts before $3.
UPDATE export_orders SET valid_to = $3
WHERE tenant = $1 AND order_no = $2 AND valid_to IS NULL
RETURNING customer, amount_minor, currency, status, created_at;

-- name: OrderIDMax
SELECT coalesce(max(id), 0) FROM export_orders;

-- name: OrdersLiveSample
SELECT order_no FROM export_orders WHERE tenant = $1 AND valid_to IS NULL ORDER BY id LIMIT $2 OFFSET $3;

-- name: CutStats
SELECT count(*), coalesce(min(id), 0), coalesce(max(id), 0) FROM export_orders
WHERE tenant = $1 AND valid_from <= $2 AND (valid_to IS NULL OR valid_to > $2)
  AND ($3 = '' OR status = $3) AND created_at >= $4 AND created_at < $5;

-- name: SourceBatch
-- One keyset batch of a shard: ids only grow and a cut's rows never
-- change, so (cursor, hi] read now or after a crash yields the same rows.
SELECT id, order_no, customer, amount_minor, currency, status, created_at FROM export_orders
WHERE tenant = $1 AND valid_from <= $2 AND (valid_to IS NULL OR valid_to > $2)
  AND ($3 = '' OR status = $3) AND created_at >= $4 AND created_at < $5
  AND id > $6 AND id <= $7
ORDER BY id LIMIT $8;

-- name: GrantPut
INSERT INTO export_grants (tenant, user_id, permission) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING;

-- name: GrantDelete
DELETE FROM export_grants WHERE tenant = $1 AND user_id = $2 AND permission = $3;

-- name: GrantsOf
SELECT permission FROM export_grants WHERE tenant = $1 AND user_id = $2 ORDER BY permission;

-- name: TaskFindRecent
SELECT id FROM export_tasks
WHERE tenant = $1 AND user_id = $2 AND params_digest = $3 AND created_at >= $4
  AND state NOT IN ('failed', 'cancelled')
ORDER BY id DESC LIMIT 1;

-- name: TaskCountKey
SELECT count(*) FROM export_tasks WHERE idem_key LIKE $1;

-- name: TaskInsert
INSERT INTO export_tasks (tenant, user_id, params, params_digest, permissions, data_version, idem_key,
    format, gzip, bom, range_lo, range_hi, estimated_rows, shard_count, state, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $16)
ON CONFLICT (idem_key) DO NOTHING
RETURNING id;

-- name: TaskByIdem
SELECT id FROM export_tasks WHERE idem_key = $1;

-- name: InflightUser
SELECT count(*) FROM export_tasks WHERE tenant = $1 AND user_id = $2 AND state IN ('running', 'merging');

-- name: InflightTenant
SELECT count(*) FROM export_tasks WHERE tenant = $1 AND state IN ('running', 'merging');

-- name: ShardInsert
INSERT INTO export_shards (task_id, shard_no, lo, hi, state, cursor, updated_at) VALUES ($1, $2, $3, $4, 'pending', $3, $5);

-- name: ShardSetJob
UPDATE export_shards SET job_id = $3 WHERE task_id = $1 AND shard_no = $2;

-- name: TaskGet
SELECT id, tenant, user_id, params, permissions, data_version, idem_key, format, gzip, bom, range_lo, range_hi,
    estimated_rows, shard_count, shards_done, rows_done, state, merge_gen, coalesce(object_key, ''),
    coalesce(object_sha256, ''), coalesce(object_bytes, 0), coalesce(object_rows, 0), verdict, verdict_detail,
    notice_state, error, created_at, updated_at, finished_at
FROM export_tasks WHERE id = $1;

-- name: TaskList
SELECT id FROM export_tasks WHERE ($1 = '' OR tenant = $1) AND ($2 = '' OR user_id = $2) AND id < $3 ORDER BY id DESC LIMIT $4;

-- name: RunningTenants
SELECT DISTINCT tenant FROM export_tasks WHERE state = 'running';

-- name: OldWaitingTenants
-- Tenants with a running task created at or before the cutoff that still
-- has a shard no executor has adopted: the claims the reserved share serves.
SELECT DISTINCT t.tenant FROM export_tasks t
WHERE t.state = 'running' AND t.created_at <= $1
  AND EXISTS (SELECT 1 FROM export_shards s WHERE s.task_id = t.id AND s.state = 'pending');

-- name: CapLock
-- Takes the row lock of one in-flight scope (a tenant, or a tenant's user)
-- for the rest of the transaction, creating the row on first use: requests
-- of the same scope count their running tasks one after the other.
INSERT INTO export_caps (scope) VALUES ($1) ON CONFLICT (scope) DO UPDATE SET scope = excluded.scope;

-- name: ShardsOf
SELECT shard_no, lo, hi, state, coalesce(job_id, 0), fence, owner, cursor, rows, bytes, chunks, sha256,
    stale_refused, settled, note, updated_at
FROM export_shards WHERE task_id = $1 ORDER BY shard_no;

-- name: ShardAdopt
-- The engine's fence of this claim becomes the shard's: only a larger one
-- takes over, so a stale claim adopts nothing.
UPDATE export_shards SET fence = $3, owner = $4, state = 'running', updated_at = $5
WHERE task_id = $1 AND shard_no = $2 AND fence < $3 AND state IN ('pending', 'running')
RETURNING lo, hi, cursor, rows, bytes, chunks, sha_state;

-- name: ShardState
SELECT state, fence FROM export_shards WHERE task_id = $1 AND shard_no = $2;

-- name: ChunkCommit
-- Cursor and counts commit with the fence and the chunk number in the
-- condition: an executor that lost the shard changes nothing.
UPDATE export_shards SET cursor = $4, rows = $5, bytes = $6, chunks = $7 + 1, sha_state = $8, updated_at = $9
WHERE task_id = $1 AND shard_no = $2 AND fence = $3 AND state = 'running' AND chunks = $7;

-- name: ChunkSums
SELECT sha256 FROM export_chunks WHERE task_id = $1 AND shard_no = $2 ORDER BY chunk_no;

-- name: ChunkInsert
INSERT INTO export_chunks (task_id, shard_no, chunk_no, object_key, first_id, last_id, rows, bytes, sha256)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9);

-- name: TaskRowsAdd
UPDATE export_tasks SET rows_done = rows_done + $2, updated_at = $3 WHERE id = $1;

-- name: ShardStale
UPDATE export_shards SET stale_refused = stale_refused + 1 WHERE task_id = $1 AND shard_no = $2;

-- name: ShardSettled
UPDATE export_shards SET settled = $3 WHERE task_id = $1 AND shard_no = $2 AND fence = $4;

-- name: ShardFinish
UPDATE export_shards SET state = 'done', sha256 = $4, updated_at = $5
WHERE task_id = $1 AND shard_no = $2 AND fence = $3 AND state = 'running';

-- name: TaskShardDone
-- With TaskPublish and TaskMergeBump: the state test in the IS TRUE form
-- keeps the lookup on the primary key. A plain one is an index condition
-- of export_tasks_open_idx (state, created_at), and analyzed while no task
-- ran the generic plan walked every running task, once per shard
-- (TestPlansAfterAnalyze).
UPDATE export_tasks SET shards_done = shards_done + 1, updated_at = $2,
    state = CASE WHEN shards_done + 1 = shard_count THEN 'merging' ELSE state END
WHERE id = $1 AND (state = 'running') IS TRUE
RETURNING shards_done, shard_count, merge_gen;

-- name: ShardQuarantine
UPDATE export_shards SET state = 'quarantined', note = $4, updated_at = $5
WHERE task_id = $1 AND shard_no = $2 AND fence = $3 AND state = 'running';

-- name: TaskQuarantine
UPDATE export_tasks SET state = 'quarantined', error = $2, updated_at = $3 WHERE id = $1 AND state IN ('running', 'merging');

-- name: QuarantineInsert
INSERT INTO export_quarantine (object_key, task_id, reason, at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING;

-- name: QuarantineList
SELECT object_key, task_id, reason, at FROM export_quarantine WHERE task_id = $1 ORDER BY object_key;

-- name: TaskPublish
-- Publishing names the verified object's digest; only the merge of the
-- current generation of a merging task can do it, once.
UPDATE export_tasks SET state = 'succeeded', object_key = $3, object_sha256 = $4, object_bytes = $5,
    object_rows = $6, verdict = $7, verdict_detail = $8, updated_at = $9, finished_at = $9
WHERE id = $1 AND merge_gen = $2 AND (state = 'merging') IS TRUE;

-- name: TaskMergeBump
UPDATE export_tasks SET merge_gen = merge_gen + 1, updated_at = $3
WHERE id = $1 AND merge_gen = $2 AND (state = 'merging') IS TRUE
RETURNING merge_gen;

-- name: TaskFail
UPDATE export_tasks SET state = 'failed', error = $2, verdict = $3, verdict_detail = $4, updated_at = $5, finished_at = $5
WHERE id = $1 AND state IN ('running', 'merging');

-- name: TaskCancel
UPDATE export_tasks SET state = 'cancelled', updated_at = $2, finished_at = $2 WHERE id = $1 AND state IN ('running', 'merging');

-- name: TaskReopen
UPDATE export_tasks SET state = 'running', error = '', updated_at = $2, finished_at = NULL WHERE id = $1 AND state IN ('failed', 'quarantined');

-- name: TaskNotice
UPDATE export_tasks SET notice_state = $2 WHERE id = $1;

-- name: NoticeInsert
INSERT INTO export_notices (task_id, user_id, body, at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING;

-- name: NoticeCount
SELECT count(*) FROM export_notices WHERE task_id = $1;

-- name: ChunksOf
SELECT shard_no, chunk_no, object_key, first_id, last_id, rows, bytes, sha256
FROM export_chunks WHERE task_id = $1 ORDER BY shard_no, chunk_no;

-- name: TaskRef
SELECT state, coalesce(object_key, '') FROM export_tasks WHERE id = $1;

-- name: QuarantineRef
SELECT count(*) FROM export_quarantine WHERE object_key = $1;

-- name: OrphanMark
INSERT INTO export_orphans (object_key, marked_at) VALUES ($1, $2) ON CONFLICT DO NOTHING;

-- name: OrphanGet
SELECT marked_at, deleted_at FROM export_orphans WHERE object_key = $1;

-- name: OrphanDeleted
UPDATE export_orphans SET deleted_at = $2 WHERE object_key = $1 AND deleted_at IS NULL;

-- name: OrphanUnmark
DELETE FROM export_orphans WHERE object_key = $1 AND deleted_at IS NULL;

-- name: OrphanList
SELECT object_key, marked_at, deleted_at FROM export_orphans ORDER BY marked_at DESC LIMIT $1;

-- name: HomeStats
SELECT count(*), min(created_at) FROM export_tasks WHERE state IN ('running', 'merging');

-- name: OrdersGenerate
-- The generator: $2 orders of tenant $1 in one statement, numbered after
-- $3, one second apart from $4, all of data version $5. Every 50th
-- customer name carries a comma and quotes so that CSV quoting is always
-- exercised.
INSERT INTO export_orders (tenant, order_no, customer, amount_minor, currency, status, created_at, valid_from)
SELECT $1, 'SO' || ($3::bigint + g),
    CASE WHEN g % 50 = 0 THEN 'Zhang, "Wei" ' || (g % 997) ELSE '客户' || (g % 997) END,
    100 + (g * 7919) % 100000, 'CNY',
    CASE g % 3 WHEN 0 THEN 'paid' WHEN 1 THEN 'shipped' ELSE 'refunded' END,
    $4::timestamptz + g * interval '1 second', $5
FROM generate_series(1::bigint, $2::bigint) AS g;
