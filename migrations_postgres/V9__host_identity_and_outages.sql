-- threadbase PostgreSQL schema, version 9 (SQLite's version 20): a host id that cannot collide
-- silently, and leases that survive an outage of the database (issue 46). The same columns and
-- views as SQLite's V20; see its comments. Timestamps are ISO text cast to timestamptz and
-- compared with the server's clock, for SQLite's julianday; LEAST skips NULLs as SQLite's
-- min() with coalesce does there.
ALTER TABLE host_serves ADD COLUMN pid_ns text COLLATE "C";
ALTER TABLE host_serves ADD COLUMN gap_from text COLLATE "C";
ALTER TABLE host_serves ADD COLUMN resumed_at text COLLATE "C";

CREATE VIEW host_lease AS
SELECT to_char(LEAST(x.now_cut, x.newest_cut, x.gap_cut) AT TIME ZONE 'UTC',
               'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') COLLATE "C" AS cutoff,
       to_char((x.resumed + interval '30 seconds') AT TIME ZONE 'UTC',
               'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') COLLATE "C" AS outage_until
FROM (
    SELECT clock_timestamp() - interval '30 seconds' AS now_cut,
           (SELECT CASE WHEN max(CAST(s.heartbeat_at AS timestamptz))
                             > clock_timestamp() - interval '600 seconds'
                        THEN max(CAST(s.heartbeat_at AS timestamptz)) - interval '30 seconds' END
            FROM host_serves s) AS newest_cut,
           (SELECT min(CAST(s.gap_from AS timestamptz)) - interval '30 seconds' FROM host_serves s
            WHERE CAST(s.resumed_at AS timestamptz) > clock_timestamp() - interval '30 seconds')
               AS gap_cut,
           (SELECT max(CAST(s.resumed_at AS timestamptz)) FROM host_serves s
            WHERE CAST(s.resumed_at AS timestamptz) > clock_timestamp() - interval '30 seconds')
               AS resumed
) AS x;

DROP VIEW thread_attention;
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
                    AND b.host_heartbeat <= b.lease_cutoff
                   THEN 'unreachable'
               WHEN b.status = 'live' AND b.owner_pid IS NOT NULL AND b.host_heartbeat IS NOT NULL
                    AND (b.owner_heartbeat IS NULL
                         OR b.owner_heartbeat <= b.lease_cutoff)
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
        SELECT c.*, hh.heartbeat_at AS host_heartbeat, os.heartbeat_at AS owner_heartbeat,
               l.cutoff AS lease_cutoff
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
        -- The lease's cutoff, once (host_lease: a row).
        CROSS JOIN host_lease AS l
        LEFT JOIN host_serves os
          ON os.host_id = c.owner_host AND os.boot_id = c.owner_boot
         AND os.pid = c.owner_pid AND os.started_at = c.owner_started_at
    ) AS b
) AS a
WHERE a.attention IS NOT NULL;
