-- The export module's tables. The task, shard and chunk rows are the
-- authority over an export; the object store only holds bytes they name.

-- The data version: one counter every change to the source takes a new
-- value from, in the change's own transaction. A cut is a version: the rows
-- of version V are those with valid_from <= V and (valid_to IS NULL or
-- valid_to > V), a set that no later change can alter.
CREATE TABLE export_data_version (
    id      integer PRIMARY KEY CHECK (id = 1),
    version INTEGER  NOT NULL
);
INSERT INTO export_data_version (id, version) VALUES (1, 0);

-- The business source: orders, kept as row versions. An update closes the
-- old row (valid_to) and inserts the new one under a new id; a delete only
-- closes. Ids only grow, so an id range is a stable key range.
CREATE TABLE export_orders (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant       text        NOT NULL,
    order_no     text        NOT NULL,
    customer     text        NOT NULL,
    amount_minor INTEGER      NOT NULL,
    currency     text        NOT NULL,
    status       text        NOT NULL,
    created_at   INTEGER NOT NULL,
    valid_from   INTEGER      NOT NULL,
    valid_to     INTEGER
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
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant         text        NOT NULL,
    user_id        text        NOT NULL,
    params         text        NOT NULL,
    params_digest  text        NOT NULL,
    permissions    text        NOT NULL,
    data_version   INTEGER      NOT NULL,
    idem_key       text        NOT NULL UNIQUE,
    format         text        NOT NULL,
    gzip           INTEGER     NOT NULL,
    bom            INTEGER     NOT NULL,
    range_lo       INTEGER      NOT NULL,
    range_hi       INTEGER      NOT NULL,
    estimated_rows INTEGER      NOT NULL,
    shard_count    integer     NOT NULL,
    shards_done    integer     NOT NULL DEFAULT 0,
    rows_done      INTEGER      NOT NULL DEFAULT 0,
    state          text        NOT NULL,
    merge_gen      integer     NOT NULL DEFAULT 1,
    object_key     text,
    object_sha256  text,
    object_bytes   INTEGER,
    object_rows    INTEGER,
    verdict        text        NOT NULL DEFAULT '',
    verdict_detail text        NOT NULL DEFAULT '',
    notice_state   text        NOT NULL DEFAULT '',
    error          text        NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    finished_at    INTEGER
);
CREATE INDEX export_tasks_open_idx ON export_tasks (state, created_at);
CREATE INDEX export_tasks_user_idx ON export_tasks (tenant, user_id, params_digest, created_at);

-- One row per shard: the key range (lo, hi], and what its current owner
-- (fence) has committed: cursor, counts, the running SHA-256 state.
CREATE TABLE export_shards (
    task_id       INTEGER      NOT NULL REFERENCES export_tasks (id),
    shard_no      integer     NOT NULL,
    lo            INTEGER      NOT NULL,
    hi            INTEGER      NOT NULL,
    state         text        NOT NULL,
    job_id        INTEGER,
    fence         INTEGER      NOT NULL DEFAULT 0,
    owner         text        NOT NULL DEFAULT '',
    cursor        INTEGER      NOT NULL,
    rows          INTEGER      NOT NULL DEFAULT 0,
    bytes         INTEGER      NOT NULL DEFAULT 0,
    chunks        integer     NOT NULL DEFAULT 0,
    sha_state     BLOB,
    sha256        text        NOT NULL DEFAULT '',
    stale_refused integer     NOT NULL DEFAULT 0,
    settled       text        NOT NULL DEFAULT '',
    note          text        NOT NULL DEFAULT '',
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (task_id, shard_no)
);

-- The committed chunk objects of a shard, in cursor order.
CREATE TABLE export_chunks (
    task_id    INTEGER NOT NULL,
    shard_no   integer NOT NULL,
    chunk_no   integer NOT NULL,
    object_key text   NOT NULL,
    first_id   INTEGER NOT NULL,
    last_id    INTEGER NOT NULL,
    rows       INTEGER NOT NULL,
    bytes      INTEGER NOT NULL,
    sha256     text   NOT NULL,
    PRIMARY KEY (task_id, shard_no, chunk_no),
    FOREIGN KEY (task_id, shard_no) REFERENCES export_shards (task_id, shard_no)
);
CREATE INDEX export_chunks_key_idx ON export_chunks (object_key);

-- Objects found at a stable key that did not match what their owner would
-- write: kept, never overwritten, never cleaned.
CREATE TABLE export_quarantine (
    object_key text        PRIMARY KEY,
    task_id    INTEGER      NOT NULL,
    reason     text        NOT NULL,
    at         INTEGER NOT NULL
);

-- The orphan cleaner's marks: an unreferenced object is marked first and
-- deleted only on a later pass.
CREATE TABLE export_orphans (
    object_key text        PRIMARY KEY,
    marked_at  INTEGER NOT NULL,
    deleted_at INTEGER
);

-- Completion notices delivered (the in-site notice box), one per task.
CREATE TABLE export_notices (
    task_id    INTEGER      PRIMARY KEY,
    user_id    text        NOT NULL,
    body       text        NOT NULL,
    at         INTEGER NOT NULL
);
