-- threadbase schema, version 1.
--
-- Every fact about a thread tree is a row here. Text timestamps are ISO-8601 UTC with
-- milliseconds (what JavaScript's toISOString prints), so ad-hoc SQL reads them directly and
-- they sort chronologically as text.

-- One manager per (parent session, contract): the `thread` tool's manager of a Pi session
-- (A), a subagent registry (B) or a worker coordinator (C). The owning process is recorded
-- as pid + process start time so a crash can be told apart from pid reuse.
CREATE TABLE managers (
    id               INTEGER PRIMARY KEY,
    session_id       TEXT    NOT NULL CHECK (length(session_id) > 0),
    contract         TEXT    NOT NULL CHECK (contract IN ('thread', 'agent', 'worker')),
    scope_path       TEXT    NOT NULL DEFAULT '/root',
    depth            INTEGER NOT NULL DEFAULT 0 CHECK (depth >= 0),
    self_thread_id   TEXT,
    session_file     TEXT,
    cwd              TEXT,
    owner_pid        INTEGER CHECK (owner_pid IS NULL OR owner_pid > 0),
    owner_started_at INTEGER,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    UNIQUE (session_id, contract)
);

CREATE TABLE threads (
    id                 TEXT    PRIMARY KEY,
    manager_id         INTEGER NOT NULL REFERENCES managers (id) ON DELETE CASCADE,
    path               TEXT    NOT NULL CHECK (substr(path, 1, 1) = '/' AND instr(path, '!') = 0),
    -- NULL for a top-level thread of its tree (contract B independent roots, C workers).
    parent_path        TEXT,
    parent_id          TEXT    REFERENCES threads (id) ON DELETE SET NULL,
    task_name          TEXT    NOT NULL CHECK (length(task_name) > 0),
    name               TEXT    NOT NULL,
    depth              INTEGER NOT NULL CHECK (depth >= 0),
    cwd                TEXT    NOT NULL,
    args               TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(args) AND json_type(args) = 'array'),
    status             TEXT    NOT NULL DEFAULT 'live' CHECK (status IN ('live', 'closed')),
    phase              TEXT    NOT NULL DEFAULT 'starting'
                               CHECK (phase IN ('starting', 'busy', 'idle', 'stopping', 'failed', 'stale')),
    -- Contract B's lifecycle state and status line; NULL for other contracts.
    agent_state        TEXT    CHECK (agent_state IN ('starting', 'running', 'completed', 'paused', 'stopped', 'failed')),
    status_text        TEXT,
    exit_kind          TEXT    CHECK (exit_kind IN ('exited', 'stopped', 'failed', 'stale')),
    exit_code          INTEGER,
    exit_signal        TEXT,
    exit_message       TEXT,
    -- 1 while the recorded exit was synthesized by a stop; a late real exit replaces it.
    exit_synthetic     INTEGER NOT NULL DEFAULT 0 CHECK (exit_synthetic IN (0, 1)),
    archived           INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1)),
    -- Contract C's hidden override: NULL = derived from the report verdict.
    hidden             INTEGER CHECK (hidden IN (0, 1)),
    session_file       TEXT,
    session_id         TEXT,
    -- The child process, and the serve process that holds its pipes (the lease).
    pid                INTEGER CHECK (pid IS NULL OR pid > 0),
    pgid               INTEGER CHECK (pgid IS NULL OR pgid > 1),
    process_started_at INTEGER,
    owner_pid          INTEGER CHECK (owner_pid IS NULL OR owner_pid > 0),
    owner_started_at   INTEGER,
    launch_seq         INTEGER NOT NULL DEFAULT 0,
    stop_requested     INTEGER NOT NULL DEFAULT 0 CHECK (stop_requested IN (0, 1)),
    last_seq           INTEGER NOT NULL DEFAULT 0,
    created_at         TEXT    NOT NULL,
    updated_at         TEXT    NOT NULL,
    last_event_at      TEXT    NOT NULL,
    live_started_at    TEXT,
    idle_started_at    TEXT,
    prompt             TEXT,
    -- Contract B: the task label, final output and error.
    task               TEXT,
    output             TEXT,
    error              TEXT,
    model              TEXT,
    thinking           TEXT,
    -- Contract C: the coordinator, spawn key and request fingerprint.
    coordinator_id     TEXT,
    spawn_key          TEXT    CHECK (spawn_key IS NULL OR length(spawn_key) BETWEEN 1 AND 200),
    fingerprint        TEXT    CHECK (fingerprint IS NULL OR length(fingerprint) = 64),
    title              TEXT,
    agent              TEXT,
    outcome            TEXT    CHECK (outcome IN ('succeeded', 'failed', 'interrupted')),
    granted_paths      TEXT    CHECK (granted_paths IS NULL OR json_valid(granted_paths)),
    initial_message_id TEXT,
    report_message_id  TEXT,
    -- The path with '_' mapped below '/', so byte order matches JavaScript's localeCompare on
    -- contract A's alphabet (`_` < `/` < digits < letters). '!' never occurs in a path.
    sort_key           TEXT    GENERATED ALWAYS AS (replace(path, '_', '!')) VIRTUAL,
    -- A child's path is its parent's path plus its own segment, always.
    CHECK (path = coalesce(parent_path, '') || '/' || task_name),
    CHECK (status = 'live' OR exit_kind IS NOT NULL),
    UNIQUE (manager_id, path)
);

-- Why: list sorted by path and `ancestor` filters are range scans on this index
-- (sort_key > P||'/' AND sort_key < P||'0'), so a subtree of k costs O(log n + k).
CREATE INDEX threads_by_sort_key ON threads (manager_id, sort_key);
-- Why: `parent` filters read one parent's children already in list order.
CREATE INDEX threads_by_parent ON threads (manager_id, parent_path, sort_key);
-- Why: reference resolution step 3 (unique task name or basename) is an equality lookup whose
-- few matches come out already in list order (sort_key), so SQLite never walks the manager.
CREATE INDEX threads_by_task_name ON threads (manager_id, task_name, sort_key);
-- Why: live counts for limits and the restore pass touch only live rows.
CREATE INDEX threads_live ON threads (manager_id, owner_pid) WHERE status = 'live';
-- Why: contract C looks a worker up by coordinator and spawn key (idempotent spawn).
CREATE UNIQUE INDEX threads_by_spawn_key ON threads (coordinator_id, spawn_key)
    WHERE coordinator_id IS NOT NULL AND spawn_key IS NOT NULL;
-- Why: `threadbase list` across every manager, path-ordered, without a sort step.
CREATE INDEX threads_global_sort ON threads (sort_key);

-- Retained lifecycle events: a ring of the newest 40 per thread; seq only grows.
CREATE TABLE thread_events (
    thread_id TEXT    NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL CHECK (seq > 0),
    at        TEXT    NOT NULL,
    type      TEXT    NOT NULL CHECK (type IN (
                  'thread_started', 'thread_resumed', 'thread_forked', 'thread_archived',
                  'thread_stopping', 'thread_closed', 'thread_error',
                  'turn_started', 'turn_completed', 'tool_started', 'tool_completed',
                  'assistant_message', 'ui_request')),
    data      TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(data)),
    PRIMARY KEY (thread_id, seq)
) WITHOUT ROWID;

-- Retained output text, apart from `threads` so streaming deltas do not rewrite the wide row.
CREATE TABLE thread_output (
    thread_id           TEXT    PRIMARY KEY REFERENCES threads (id) ON DELETE CASCADE,
    last_assistant_text TEXT,
    last_partial_text   TEXT,
    stderr_tail         BLOB    NOT NULL DEFAULT x'',
    stderr_dropped      INTEGER NOT NULL DEFAULT 0 CHECK (stderr_dropped >= 0),
    turn_open           INTEGER NOT NULL DEFAULT 0 CHECK (turn_open IN (0, 1))
) WITHOUT ROWID;

-- Mailbox: every message for a thread (sends into the child) or about it (notices for its
-- parent), keyed for idempotency. Delivery state is updated in the same transaction that
-- records its effect.
CREATE TABLE mailbox (
    id           INTEGER PRIMARY KEY,
    thread_id    TEXT    NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    direction    TEXT    NOT NULL CHECK (direction IN ('to_child', 'to_parent')),
    kind         TEXT    NOT NULL CHECK (kind IN ('prompt', 'steer', 'follow_up', 'notice', 'progress', 'report')),
    send_key     TEXT,
    message_id   TEXT,
    body         TEXT    NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    created_at   TEXT    NOT NULL,
    delivered_at TEXT,
    UNIQUE (thread_id, send_key)
);
-- Why: the owning serve polls pending messages for its threads after each data_version change.
CREATE INDEX mailbox_pending ON mailbox (thread_id, id) WHERE state = 'pending';

-- Control requests from other processes (an emergency stop from the browser, an interrupt),
-- carried out by the serve that owns the thread.
CREATE TABLE commands (
    id         INTEGER PRIMARY KEY,
    thread_id  TEXT    NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    kind       TEXT    NOT NULL CHECK (kind IN ('stop', 'force_stop', 'interrupt')),
    state      TEXT    NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'failed')),
    result     TEXT,
    created_at TEXT    NOT NULL,
    done_at    TEXT
);
-- Why: an owner scans only pending commands, which are few.
CREATE INDEX commands_pending ON commands (thread_id) WHERE state = 'pending';

-- Contract C: one report per worker.
CREATE TABLE reports (
    worker_id  TEXT PRIMARY KEY REFERENCES threads (id) ON DELETE CASCADE,
    verdict    TEXT NOT NULL CHECK (verdict IN ('PASS', 'PASS WITH NOTES', 'FAIL', 'INCONCLUSIVE')),
    summary    TEXT NOT NULL CHECK (length(trim(summary)) > 0),
    evidence   TEXT NOT NULL CHECK (json_valid(evidence) AND json_type(evidence) = 'array'),
    message_id TEXT NOT NULL,
    created_at TEXT NOT NULL
);

-- Every thread with its manager's session and contract, in list order.
CREATE VIEW thread_tree AS
SELECT t.id, m.session_id AS manager_session, m.contract, t.path, t.parent_path, t.depth,
       t.task_name, t.name, t.status, t.phase, t.agent_state, t.exit_kind, t.archived,
       t.cwd, t.pid, t.created_at, t.last_event_at
FROM threads t JOIN managers m ON m.id = t.manager_id
ORDER BY t.sort_key, m.session_id;

-- Threads that claim a running process right now.
CREATE VIEW live_threads AS
SELECT t.id, m.session_id AS manager_session, m.contract, t.path, t.name, t.phase,
       t.agent_state, t.pid, t.pgid, t.owner_pid, t.live_started_at, t.last_event_at
FROM threads t JOIN managers m ON m.id = t.manager_id
WHERE t.status = 'live'
ORDER BY t.sort_key;
