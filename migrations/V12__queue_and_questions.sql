-- threadbase schema, version 12: the durable queue (THREADBASE_QUEUE=1) and a child's questions
-- to its parent (THREADBASE_UI=parent), issue 30.

-- When a start over the live limit was queued instead of refused; NULL for a thread that was
-- never queued. A queued row is live and `starting` from its insert (its id, path and name are
-- taken at once) but holds no slot and has no process until a slot is claimed for it.
ALTER TABLE threads ADD COLUMN queued_at TEXT;
-- When a freed slot was claimed for a queued row (by the transaction that counted the free
-- slot); its launch follows. A claimed row with launch_seq 0 was never launched: the next serve
-- of its manager launches it (a crash between the claim and the launch loses nothing).
ALTER TABLE threads ADD COLUMN dequeued_at TEXT;

-- Why: the queue's rank query (a thread's position, the oldest waiting row of a manager) and
-- the slot count read only the rows still waiting for a slot; this partial index holds just
-- those (a handful), in rowid order per manager, which is the queue's order.
CREATE INDEX threads_queue_waiting ON threads (manager_id)
    WHERE queued_at IS NOT NULL AND dequeued_at IS NULL AND status = 'live';

-- A child's dialog (`ctx.ui.confirm`, `select`, `input`, `editor`) waiting for its parent's
-- answer. One row per request; `state` says how it ended. The answer is written once, on the
-- condition that the row is still pending, so none is answered twice.
CREATE TABLE ui_requests (
    id           INTEGER PRIMARY KEY,
    thread_id    TEXT    NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    -- The launch of the thread that asked (a later launch never answers an older one's).
    launch_seq   INTEGER NOT NULL,
    -- The child's own request id (`extension_ui_request.id`), echoed in the response.
    request_id   TEXT    NOT NULL,
    kind         TEXT    NOT NULL CHECK (kind IN ('confirm', 'select', 'input', 'editor')),
    title        TEXT,
    message      TEXT,
    -- `select`'s options as a JSON array; NULL for the other kinds.
    options      TEXT    CHECK (options IS NULL OR (json_valid(options) AND json_type(options) = 'array')),
    asked_at     TEXT    NOT NULL,
    -- Epoch milliseconds after which the question is cancelled as timed out.
    deadline_ms  INTEGER NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'pending'
                         CHECK (state IN ('pending', 'answered', 'timed_out', 'cancelled')),
    -- The answer as JSON (`true`/`false` for confirm, a string otherwise); NULL unless answered.
    answer       TEXT    CHECK (answer IS NULL OR json_valid(answer)),
    answered_at  TEXT,
    -- Who answered or ended it: `thread_answer`, `cli`, `top`, `timeout`, `stop`, `exit`, `restore`.
    answered_by  TEXT,
    CHECK ((state = 'pending') = (answered_at IS NULL)),
    CHECK ((state = 'answered') = (answer IS NOT NULL))
);

-- Why: a thread's pending question is read by every poll, wait and list of a live thread, and
-- the serve holding the child polls its pending rows for an answer; pending rows are few, so a
-- partial index keeps that one short range.
CREATE INDEX ui_requests_pending ON ui_requests (thread_id) WHERE state = 'pending';
-- Why: a thread's questions in order (`threadbase events`-like history, `show`); and the
-- foreign key's cascade on a thread's delete.
CREATE INDEX ui_requests_by_thread ON ui_requests (thread_id, id);
