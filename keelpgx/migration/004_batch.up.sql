-- Engine line, version 4: bulk tasks (batches).
--
-- A batch is a frozen snapshot of items; each item is a keel_job row with
-- batch_id and subject ((batch_id, subject) is unique since version 1). The
-- subject's own record lives in the module's tables and is never touched by
-- a batch: there is deliberately no foreign key and no cascade.
--
-- Counters are a ledger: every item transition that changes the item's
-- outcome bucket appends (-1 old, +1 new) rows to keel_batch_count from a
-- trigger on keel_job, in the transaction of the transition itself, so no
-- code path can forget them and the per-batch sum always equals the number
-- of items. Appending (instead of updating one counter row) means item
-- transitions of one batch never wait on each other, and transactions that
-- touch items of several batches cannot deadlock on counter rows. The
-- leader compacts each batch's ledger into one row per bucket.

CREATE TABLE keel_batch (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind                text             NOT NULL,
    name                text             NOT NULL DEFAULT '',
    reason              text             NOT NULL,
    filter              jsonb            NOT NULL DEFAULT '{}',
    filter_hash         text             NOT NULL DEFAULT '',
    snapshot_at         timestamptz      NOT NULL,
    created_by          text             NOT NULL,
    queue               text             NOT NULL DEFAULT 'default',
    rate                double precision NOT NULL DEFAULT 0,
    autopause_failures  integer          NOT NULL DEFAULT 0,
    pause_on_key_pause  boolean          NOT NULL DEFAULT false,
    preview             jsonb            NOT NULL DEFAULT '{}',
    state               text             NOT NULL DEFAULT 'queued',
    materialized        boolean          NOT NULL DEFAULT false,
    pause_reason        text             NOT NULL DEFAULT '',
    pause_context       jsonb            NOT NULL DEFAULT '{}',
    last_error          text             NOT NULL DEFAULT '',
    created_at          timestamptz      NOT NULL DEFAULT now(),
    started_at          timestamptz,
    paused_at           timestamptz,
    completed_at        timestamptz,
    updated_at          timestamptz      NOT NULL DEFAULT now(),
    CONSTRAINT keel_batch_state_check CHECK (state IN ('queued', 'running', 'paused', 'completed',
        'partial_completed', 'terminated')),
    CONSTRAINT keel_batch_reason_check CHECK (char_length(reason) >= 5),
    CONSTRAINT keel_batch_values_check CHECK (rate >= 0 AND autopause_failures >= 0)
);
CREATE INDEX keel_batch_state_idx ON keel_batch (state, id);

CREATE TABLE keel_batch_count (
    batch_id bigint NOT NULL,
    bucket   text   NOT NULL,
    n        bigint NOT NULL
);
CREATE INDEX keel_batch_count_batch_idx ON keel_batch_count (batch_id);

-- The outcome bucket of an item, from its job state. Inlined by the planner
-- (a plain SQL expression), used by the trigger, the recount and the item
-- filters so that all three agree by construction.
CREATE FUNCTION keel_batch_bucket(state text, wait_reason text, result jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE state
        WHEN 'running' THEN 'processing'
        WHEN 'unknown' THEN 'processing'
        WHEN 'waiting' THEN CASE wait_reason
            WHEN 'connection' THEN 'waiting_connection'
            WHEN 'external_ack' THEN 'waiting_external_ack'
            WHEN 'ack' THEN 'waiting_ack'
            ELSE 'waiting' END
        WHEN 'completed' THEN 'success'
        WHEN 'failed' THEN 'failed'
        WHEN 'manual' THEN 'failed'
        WHEN 'skipped' THEN 'skipped'
        WHEN 'cancelled' THEN CASE WHEN result ->> 'reason' = 'batch_terminated'
                                   THEN 'unprocessed' ELSE 'failed' END
        ELSE 'queued' END
$$;

CREATE FUNCTION keel_batch_count_trigger() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    old_bucket text;
    new_bucket text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO keel_batch_count (batch_id, bucket, n)
        VALUES (NEW.batch_id, keel_batch_bucket(NEW.state, NEW.wait_reason, NEW.result), 1);
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        INSERT INTO keel_batch_count (batch_id, bucket, n)
        VALUES (OLD.batch_id, keel_batch_bucket(OLD.state, OLD.wait_reason, OLD.result), -1);
        RETURN NULL;
    END IF;
    old_bucket := keel_batch_bucket(OLD.state, OLD.wait_reason, OLD.result);
    new_bucket := keel_batch_bucket(NEW.state, NEW.wait_reason, NEW.result);
    IF OLD.batch_id IS NOT DISTINCT FROM NEW.batch_id AND old_bucket = new_bucket THEN
        RETURN NULL;
    END IF;
    IF OLD.batch_id IS NOT NULL THEN
        INSERT INTO keel_batch_count (batch_id, bucket, n) VALUES (OLD.batch_id, old_bucket, -1);
    END IF;
    IF NEW.batch_id IS NOT NULL THEN
        INSERT INTO keel_batch_count (batch_id, bucket, n) VALUES (NEW.batch_id, new_bucket, 1);
    END IF;
    RETURN NULL;
END
$$;

-- WHEN clauses: jobs outside batches never run the trigger function (the
-- first term is false, the rest is not evaluated). keel.batch_bulk is set,
-- transaction-locally, only around BatchItemsInsert, the set-based
-- materialization statement, which counts its own rows in the same
-- statement (every new item is 'queued'): one ledger row per chunk instead
-- of one trigger call and one ledger row per item.
CREATE TRIGGER keel_job_batch_insert AFTER INSERT ON keel_job
    FOR EACH ROW WHEN (NEW.batch_id IS NOT NULL AND current_setting('keel.batch_bulk', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION keel_batch_count_trigger();
CREATE TRIGGER keel_job_batch_update AFTER UPDATE OF state, wait_reason, result, batch_id ON keel_job
    FOR EACH ROW WHEN (NEW.batch_id IS NOT NULL OR OLD.batch_id IS NOT NULL)
    EXECUTE FUNCTION keel_batch_count_trigger();
CREATE TRIGGER keel_job_batch_delete AFTER DELETE ON keel_job
    FOR EACH ROW WHEN (OLD.batch_id IS NOT NULL) EXECUTE FUNCTION keel_batch_count_trigger();
