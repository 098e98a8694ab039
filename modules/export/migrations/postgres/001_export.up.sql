-- The export module's tables. The task, shard and chunk rows are the
-- authority over an export; the object store only holds bytes they name.

-- The data version: one counter every change to the source takes a new
-- value from, in the change's own transaction. A cut is a version: the rows
-- of version V are those with valid_from <= V and (valid_to IS NULL or
-- valid_to > V), a set that no later change can alter.
CREATE TABLE export_data_version (
    id      integer PRIMARY KEY CHECK (id = 1),
    version bigint  NOT NULL
);
INSERT INTO export_data_version (id, version) VALUES (1, 0);

-- The business source: orders, kept as row versions. An update closes the
-- old row (valid_to) and inserts the new one under a new id; a delete only
-- closes. Ids only grow, so an id range is a stable key range.
CREATE TABLE export_orders (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant       text        NOT NULL,
    order_no     text        NOT NULL,
    customer     text        NOT NULL,
    amount_minor bigint      NOT NULL,
    currency     text        NOT NULL,
    status       text        NOT NULL,
    created_at   timestamptz NOT NULL,
    valid_from   bigint      NOT NULL,
    valid_to     bigint
);
CREATE INDEX export_orders_tenant_idx ON export_orders (tenant, id);
CREATE UNIQUE INDEX export_orders_live_idx ON export_orders (tenant, order_no) WHERE valid_to IS NULL;

-- Who may export what: orders.export (export at all), orders.amount (see
-- the amount column). A task keeps a snapshot; a download checks again.
CREATE TABLE export_grants (
    tenant     text NOT NULL,
    user_id    text NOT NULL,
    permission text NOT NULL,
    PRIMARY KEY (tenant, user_id, permission)
);

CREATE TABLE export_tasks (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant         text        NOT NULL,
    user_id        text        NOT NULL,
    params         text        NOT NULL,
    params_digest  text        NOT NULL,
    permissions    text        NOT NULL,
    data_version   bigint      NOT NULL,
    idem_key       text        NOT NULL UNIQUE,
    format         text        NOT NULL,
    gzip           boolean     NOT NULL,
    bom            boolean     NOT NULL,
    range_lo       bigint      NOT NULL,
    range_hi       bigint      NOT NULL,
    estimated_rows bigint      NOT NULL,
    shard_count    integer     NOT NULL,
    shards_done    integer     NOT NULL DEFAULT 0,
    rows_done      bigint      NOT NULL DEFAULT 0,
    state          text        NOT NULL,
    merge_gen      integer     NOT NULL DEFAULT 1,
    object_key     text,
    object_sha256  text,
    object_bytes   bigint,
    object_rows    bigint,
    verdict        text        NOT NULL DEFAULT '',
    verdict_detail text        NOT NULL DEFAULT '',
    notice_state   text        NOT NULL DEFAULT '',
    error          text        NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    finished_at    timestamptz
);
CREATE INDEX export_tasks_open_idx ON export_tasks (state, created_at);
CREATE INDEX export_tasks_user_idx ON export_tasks (tenant, user_id, params_digest, created_at);

-- One row per shard: the key range (lo, hi], and what its current owner
-- (fence) has committed: cursor, counts, the running SHA-256 state.
CREATE TABLE export_shards (
    task_id       bigint      NOT NULL REFERENCES export_tasks (id),
    shard_no      integer     NOT NULL,
    lo            bigint      NOT NULL,
    hi            bigint      NOT NULL,
    state         text        NOT NULL,
    job_id        bigint,
    fence         bigint      NOT NULL DEFAULT 0,
    owner         text        NOT NULL DEFAULT '',
    cursor        bigint      NOT NULL,
    rows          bigint      NOT NULL DEFAULT 0,
    bytes         bigint      NOT NULL DEFAULT 0,
    chunks        integer     NOT NULL DEFAULT 0,
    sha_state     bytea,
    sha256        text        NOT NULL DEFAULT '',
    stale_refused integer     NOT NULL DEFAULT 0,
    settled       text        NOT NULL DEFAULT '',
    note          text        NOT NULL DEFAULT '',
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (task_id, shard_no)
);

-- The committed chunk objects of a shard, in cursor order.
CREATE TABLE export_chunks (
    task_id    bigint NOT NULL,
    shard_no   integer NOT NULL,
    chunk_no   integer NOT NULL,
    object_key text   NOT NULL,
    first_id   bigint NOT NULL,
    last_id    bigint NOT NULL,
    rows       bigint NOT NULL,
    bytes      bigint NOT NULL,
    sha256     text   NOT NULL,
    PRIMARY KEY (task_id, shard_no, chunk_no),
    FOREIGN KEY (task_id, shard_no) REFERENCES export_shards (task_id, shard_no)
);
CREATE INDEX export_chunks_key_idx ON export_chunks (object_key);

-- Objects found at a stable key that did not match what their owner would
-- write: kept, never overwritten, never cleaned.
CREATE TABLE export_quarantine (
    object_key text        PRIMARY KEY,
    task_id    bigint      NOT NULL,
    reason     text        NOT NULL,
    at         timestamptz NOT NULL
);

-- The orphan cleaner's marks: an unreferenced object is marked first and
-- deleted only on a later pass.
CREATE TABLE export_orphans (
    object_key text        PRIMARY KEY,
    marked_at  timestamptz NOT NULL,
    deleted_at timestamptz
);

-- Completion notices delivered (the in-site notice box), one per task.
CREATE TABLE export_notices (
    task_id    bigint      PRIMARY KEY,
    user_id    text        NOT NULL,
    body       text        NOT NULL,
    at         timestamptz NOT NULL
);
