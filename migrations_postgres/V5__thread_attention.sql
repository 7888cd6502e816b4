-- threadbase PostgreSQL schema, version 5 (SQLite's version 16): what needs the user, derived
-- once (issue 45). The same columns, trigger and view as SQLite's V16; see its comments. Here
-- the phase CHECK is a named constraint, replaced; timestamps are ISO text cast to timestamptz
-- and compared with the server's clock, for SQLite's julianday.
ALTER TABLE threads DROP CONSTRAINT threads_phase_check;
ALTER TABLE threads ADD CONSTRAINT threads_phase_check
    CHECK (phase IN ('starting', 'busy', 'idle', 'stopping', 'failed', 'stale', 'queued'));
UPDATE threads SET phase = 'queued'
WHERE status = 'live' AND queued_at IS NOT NULL AND dequeued_at IS NULL;

ALTER TABLE thread_output ADD COLUMN turn_error text COLLATE "C";
ALTER TABLE thread_output ADD COLUMN turn_error_at text COLLATE "C";
ALTER TABLE thread_output ADD COLUMN activity_at text COLLATE "C";
ALTER TABLE threads ADD COLUMN stall_ms bigint CHECK (stall_ms IS NULL OR stall_ms > 0);

CREATE FUNCTION thread_snapshots_stale_on_question() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM thread_snapshots WHERE thread_id = NEW.thread_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER thread_snapshots_stale_on_question_insert AFTER INSERT ON ui_requests
    FOR EACH ROW EXECUTE FUNCTION thread_snapshots_stale_on_question();
CREATE TRIGGER thread_snapshots_stale_on_question_update AFTER UPDATE ON ui_requests
    FOR EACH ROW EXECUTE FUNCTION thread_snapshots_stale_on_question();

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
           WHEN 'owner_gone' THEN 'serve pid ' || a.owner_pid::text || coalesce(' on host ' || a.host_id, '') || ' is gone'
           WHEN 'asking' THEN a.question
           WHEN 'failed' THEN CASE
               WHEN a.status = 'live' THEN a.turn_error
               WHEN a.exit_message IS NOT NULL AND a.exit_message <> ''
                   THEN split_part(a.exit_message, chr(10), 1)
               WHEN a.exit_signal IS NOT NULL THEN 'killed by ' || a.exit_signal
               WHEN a.exit_code IS NOT NULL THEN 'exit code ' || a.exit_code::text
               ELSE 'exited ' || a.exit_kind
           END
           ELSE 'no event from the child since ' || a.activity_at
       END AS detail
FROM (
    SELECT b.*,
           CASE
               WHEN b.status = 'live' AND b.host_heartbeat IS NOT NULL
                    AND CAST(b.host_heartbeat AS timestamptz) <= clock_timestamp() - interval '30 seconds'
                   THEN 'unreachable'
               WHEN b.status = 'live' AND b.owner_pid IS NOT NULL AND b.host_heartbeat IS NOT NULL
                    AND (b.owner_heartbeat IS NULL
                         OR CAST(b.owner_heartbeat AS timestamptz) <= clock_timestamp() - interval '30 seconds')
                   THEN 'owner_gone'
               WHEN b.status = 'live' AND b.question_id IS NOT NULL THEN 'asking'
               WHEN b.status = 'live' AND b.phase = 'idle' AND b.turn_error IS NOT NULL THEN 'failed'
               WHEN b.status = 'closed' AND b.archived = 0
                    AND (b.exit_kind = 'failed'
                         OR (b.exit_kind = 'exited'
                             AND (b.exit_code IS NULL OR b.exit_code <> 0 OR b.exit_signal IS NOT NULL)))
                   THEN 'failed'
               WHEN b.status = 'live' AND b.phase = 'busy'
                    AND CAST(b.activity_at AS timestamptz) <= clock_timestamp() - b.stall_ms * interval '1 millisecond'
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
