-- threadbase schema, version 5: a contract A session reaches its whole subtree, across the
-- managers of its children's own serves, and hands work on a descendant to the serve that
-- holds it as a row.
--
-- Every child Pi runs its own serve, so its own manager, whose self thread
-- (`managers.self_thread_id`) is a thread of the parent's manager. `parent_manager_id` records
-- that parent manager, so the managers below one manager are a walk down an index (a few
-- steps, one per child serve) instead of a look at every thread the manager ever kept.

ALTER TABLE managers ADD COLUMN parent_manager_id INTEGER;

UPDATE managers SET parent_manager_id = (
    SELECT t.manager_id FROM threads t WHERE t.id = managers.self_thread_id
) WHERE self_thread_id IS NOT NULL;

-- A manager's parent follows its self thread, which is set when its serve registers (the
-- thread row always exists by then) and again on every upsert of the same manager.
CREATE TRIGGER managers_parent_on_insert AFTER INSERT ON managers
WHEN NEW.self_thread_id IS NOT NULL
BEGIN
    UPDATE managers SET parent_manager_id = (
        SELECT t.manager_id FROM threads t WHERE t.id = NEW.self_thread_id
    ) WHERE id = NEW.id;
END;

CREATE TRIGGER managers_parent_on_update AFTER UPDATE OF self_thread_id ON managers
BEGIN
    UPDATE managers SET parent_manager_id = (
        SELECT t.manager_id FROM threads t WHERE t.id = NEW.self_thread_id
    ) WHERE id = NEW.id;
END;

-- Why: contract A's reach below a manager (reference resolution after its own threads,
-- `list parent`/`ancestor` into children's managers, sql/reach_*.sql and
-- sql/list_*_reach.sql) walks down from a manager to the contract A managers whose self
-- thread it holds, pruned by their scope path, one index search per step.
CREATE INDEX managers_by_parent ON managers (parent_manager_id, contract, scope_path)
    WHERE parent_manager_id IS NOT NULL;

-- `commands` gains the kinds `send` and `resume`, a `payload` (a send's mode and message)
-- and the state `running` (claimed by the owning serve, being carried out). SQLite cannot
-- change a CHECK, so the table is rebuilt with its rows and ids.
--
-- Why `commands` and not `mailbox` rows `to_child` for a send: a contract A send is one
-- request whose answer (accepted, rejected, timed out; the mode the owner chose) the
-- requesting serve waits for and returns, as it does for a stop, and a resume needs a new
-- kind anyway; `mailbox` rows `to_child` are contract B's steering and contract C's keyed
-- sends, consumed when they show in the child's transcript, with no outcome to report.
-- `running` lets a requester that gives up withdraw a command only while nobody has started
-- carrying it out (pending → failed), so a late owner never acts on a withdrawn command.
CREATE TABLE commands_v5 (
    id         INTEGER PRIMARY KEY,
    thread_id  TEXT    NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    kind       TEXT    NOT NULL
                       CHECK (kind IN ('stop', 'force_stop', 'interrupt', 'send', 'resume')),
    state      TEXT    NOT NULL DEFAULT 'pending'
                       CHECK (state IN ('pending', 'running', 'done', 'failed')),
    result     TEXT,
    created_at TEXT    NOT NULL,
    done_at    TEXT,
    -- A send's `{"message", "mode"}` (mode null: the owner picks prompt or follow_up).
    payload    TEXT    CHECK (payload IS NULL OR json_valid(payload))
);

INSERT INTO commands_v5 (id, thread_id, kind, state, result, created_at, done_at)
SELECT id, thread_id, kind, state, result, created_at, done_at FROM commands;

DROP TABLE commands;
ALTER TABLE commands_v5 RENAME TO commands;

-- Why: an owner scans only pending commands, which are few (as in V1).
CREATE INDEX commands_pending ON commands (thread_id) WHERE state = 'pending';
-- Why: `threadbase check` finds commands whose owner died while carrying them out, and a
-- wait on a thread held elsewhere asks whether a send to it is still under way; only
-- claimed rows are in it, and they are few and short-lived.
CREATE INDEX commands_running ON commands (thread_id) WHERE state = 'running';
