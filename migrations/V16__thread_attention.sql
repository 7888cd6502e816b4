-- threadbase schema, version 16: what needs the user, derived once (issue 45).
--
-- 1. `threads.phase` may be 'queued': a row waiting in the queue (THREADBASE_QUEUE=1) says so
--    in the table, not `starting`. SQLite cannot alter a CHECK, and rebuilding `threads` would
--    cascade-delete every row that references it; widening a CHECK changes no stored byte, so
--    the table's text in sqlite_schema is edited in place, as SQLite's documentation allows for
--    removing or changing a CHECK ("Making Other Kinds Of Table Schema Changes"). The list:
--    CHECK (phase IN ('starting', 'busy', 'idle', 'stopping', 'failed', 'stale', 'queued'))
--    The DDL below bumps the schema cookie, so every connection reads the new text.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql,
                  'CHECK (phase IN (''starting'', ''busy'', ''idle'', ''stopping'', ''failed'', ''stale''))',
                  'CHECK (phase IN (''starting'', ''busy'', ''idle'', ''stopping'', ''failed'', ''stale'', ''queued''))')
WHERE type = 'table' AND name = 'threads';
PRAGMA writable_schema = RESET;
-- Rows queued before this version said `starting` with queued_at set and no slot yet.
UPDATE threads SET phase = 'queued'
WHERE status = 'live' AND queued_at IS NOT NULL AND dequeued_at IS NULL;

-- 2. The facts the derivation reads that no column held.
-- The last turn's error (a provider error, an aborted stream: an assistant message that ended
-- with stopReason "error"), its first line kept whole; cleared when the next turn starts. A live
-- thread whose last turn failed needs the user even though its process is idle.
ALTER TABLE thread_output ADD COLUMN turn_error TEXT;
ALTER TABLE thread_output ADD COLUMN turn_error_at TEXT;
-- When the child last said anything at all (any event line: deltas and tool updates too),
-- written at most once a second per thread by the serve that reads it. A busy thread silent
-- longer than its manager's stall_ms is `stalled`.
ALTER TABLE thread_output ADD COLUMN activity_at TEXT;
-- THREADBASE_STALL_MS of the serve that launched the thread, written with its launch (NULL:
-- the default, 300000).
ALTER TABLE threads ADD COLUMN stall_ms INTEGER CHECK (stall_ms IS NULL OR stall_ms > 0);

-- A question is rendered into a live thread's kept answers (its `pendingQuestion`): a change
-- of the thread's questions drops them, as the other tables' triggers do (V8).
CREATE TRIGGER thread_snapshots_stale_on_question_insert AFTER INSERT ON ui_requests
BEGIN
    DELETE FROM thread_snapshots WHERE thread_id = NEW.thread_id;
END;
CREATE TRIGGER thread_snapshots_stale_on_question_update AFTER UPDATE ON ui_requests
BEGIN
    DELETE FROM thread_snapshots WHERE thread_id = NEW.thread_id;
END;

-- 3. The one derivation: a row per thread that needs the user, with what, since when and
-- why. Every surface reads it (the store's `attention` module): the `thread` tool's texts,
-- notices, tree, list, show, top, the web page, /threads, contracts B and C. One word per
-- thread, the first that holds of:
--   unreachable  live, and the host that holds it has serve rows but none beat within the
--                lease (30 s) by the database's clock: nothing can reach the thread;
--   owner_gone   live, held by a serve of a host that is up, and that serve's own heartbeat
--                row is gone or older than the lease (the host's watcher closes it as stale;
--                on the owner's own host threadbase knows sooner, from the pid);
--   asking       live with a question waiting for the parent's answer (THREADBASE_UI=parent);
--   failed       its last turn ended in an error while it is live and idle, or it ended
--                failed (exit kind failed, an exit code not 0, a signal) and is not archived;
--   stalled      live and busy with nothing from the child for its stall_ms
--                (THREADBASE_STALL_MS, default 300000); computed, never written: the next
--                event makes it busy again.
-- Each subquery is a primary-key or partial-index lookup per thread, so a filter on
-- thread_id reads only those threads.
CREATE VIEW thread_attention AS
SELECT a.thread_id, a.path, a.root_session, a.attention,
       CASE a.attention
           WHEN 'unreachable' THEN a.host_heartbeat
           WHEN 'owner_gone' THEN coalesce(a.owner_heartbeat, a.updated_at)
           WHEN 'asking' THEN a.asked_at
           WHEN 'failed' THEN CASE WHEN a.status = 'live' THEN a.turn_error_at ELSE a.updated_at END
           ELSE a.activity_at
       END AS since,
       CASE a.attention
           WHEN 'unreachable' THEN 'host ' || a.host_id || ' unreachable'
           WHEN 'owner_gone' THEN 'serve pid ' || a.owner_pid || coalesce(' on host ' || a.host_id, '') || ' is gone'
           WHEN 'asking' THEN a.question
           WHEN 'failed' THEN CASE
               WHEN a.status = 'live' THEN a.turn_error
               WHEN a.exit_message IS NOT NULL AND a.exit_message <> ''
                   THEN substr(a.exit_message, 1, instr(a.exit_message || char(10), char(10)) - 1)
               WHEN a.exit_signal IS NOT NULL THEN 'killed by ' || a.exit_signal
               WHEN a.exit_code IS NOT NULL THEN 'exit code ' || a.exit_code
               ELSE 'exited ' || a.exit_kind
           END
           ELSE 'no event from the child since ' || a.activity_at
       END AS detail
FROM (
    SELECT b.*,
           CASE
               WHEN b.status = 'live' AND b.host_heartbeat IS NOT NULL
                    AND julianday(b.host_heartbeat) <= julianday('now') - 30 / 86400.0
                   THEN 'unreachable'
               WHEN b.status = 'live' AND b.owner_pid IS NOT NULL AND b.host_heartbeat IS NOT NULL
                    AND (b.owner_heartbeat IS NULL
                         OR julianday(b.owner_heartbeat) <= julianday('now') - 30 / 86400.0)
                   THEN 'owner_gone'
               WHEN b.status = 'live' AND b.question_id IS NOT NULL THEN 'asking'
               WHEN b.status = 'live' AND b.phase = 'idle' AND b.turn_error IS NOT NULL THEN 'failed'
               WHEN b.status = 'closed' AND b.archived = 0
                    AND (b.exit_kind = 'failed'
                         OR (b.exit_kind = 'exited'
                             AND (b.exit_code IS NULL OR b.exit_code <> 0 OR b.exit_signal IS NOT NULL)))
                   THEN 'failed'
               WHEN b.status = 'live' AND b.phase = 'busy'
                    AND julianday(b.activity_at) <= julianday('now') - b.stall_ms / 86400000.0
                   THEN 'stalled'
           END AS attention
    FROM (
        SELECT c.*, hh.heartbeat_at AS host_heartbeat, os.heartbeat_at AS owner_heartbeat
        FROM (
            SELECT t.id AS thread_id, t.path, p.root_session, t.status, t.phase, t.archived,
                   t.exit_kind, t.exit_code, t.exit_signal, t.exit_message, t.updated_at,
                   t.owner_pid, t.owner_started_at, t.host_id AS owner_host,
                   t.boot_id AS owner_boot,
                   CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END AS host_id,
                   q.id AS question_id, q.asked_at,
                   coalesce(q.title, q.message, q.kind) AS question,
                   o.turn_error, o.turn_error_at,
                   coalesce(o.activity_at, t.last_event_at) AS activity_at,
                   coalesce(t.stall_ms, 300000) AS stall_ms
            FROM threads t
            JOIN managers m ON m.id = t.manager_id
            LEFT JOIN thread_places p ON p.thread_id = t.id
            LEFT JOIN thread_output o ON o.thread_id = t.id
            LEFT JOIN ui_requests q ON q.id = (
                SELECT min(u.id) FROM ui_requests u
                WHERE u.thread_id = t.id AND u.state = 'pending')
        ) AS c
        -- Each host's last heartbeat: host_serves holds a row per serve, a handful.
        LEFT JOIN (SELECT s.host_id, max(s.heartbeat_at) AS heartbeat_at
                   FROM host_serves s GROUP BY s.host_id) AS hh ON hh.host_id = c.host_id
        LEFT JOIN host_serves os
          ON os.host_id = c.owner_host AND os.boot_id = c.owner_boot
         AND os.pid = c.owner_pid AND os.started_at = c.owner_started_at
    ) AS b
) AS a
WHERE a.attention IS NOT NULL;
