-- threadbase schema, version 20: a host id that cannot collide silently, and leases that
-- survive an outage of the database (issue 46).
--
-- 1. What a serve's heartbeat row records besides its host, boot, pid and start:
--    pid_ns      its PID namespace (`pid:[4026531836]`, /proc/self/ns/pid): a pid means
--                something only in its own PID space. A serve row of this host id and boot
--                from another PID space is another machine or container sharing the host id,
--                never a process this serve can look up (NULL: a serve before this version,
--                taken to be of its host's one PID space, as that version assumed);
--    gap_from    when its heartbeats last succeeded before some failed (the database was
--                unreachable from it, or a heartbeat took longer than its period), and
--    resumed_at  when they succeeded again: the database was back then, as far as this serve
--                knows (both NULL until a heartbeat of the serve fails).
ALTER TABLE host_serves ADD COLUMN pid_ns TEXT;
ALTER TABLE host_serves ADD COLUMN gap_from TEXT;
ALTER TABLE host_serves ADD COLUMN resumed_at TEXT;

-- 2. The lease's cutoff, one row: a heartbeat at or before `cutoff` has lapsed. It is the
--    lease (30 s) before now, moved back while the database may just have been unreachable,
--    so that no host is called unreachable for an outage that was the database's:
--    - a serve whose heartbeats resumed less than a lease ago (resumed_at) moves it back to a
--      lease before its gap began (gap_from): a host whose lease still held when the database
--      went away keeps it until a full lease after the database came back (`outage_until`);
--    - while no serve has beaten yet since the database came back, every heartbeat is old:
--      the cutoff is then a lease before the newest heartbeat of any host, so only a host that
--      had lapsed already before everything went quiet reads as lapsed. This holds while the
--      newest heartbeat is younger than ten minutes: past that, no serve of any host is alive
--      (each beats every 5 s), and the cutoff is the plain one again.
--    Heartbeats are ISO text in one format ('YYYY-MM-DDTHH:MM:SS.sssZ', the database's clock),
--    so a statement compares them with `cutoff` as text. host_serves holds a row per serve.
CREATE VIEW host_lease AS
SELECT strftime('%Y-%m-%dT%H:%M:%fZ',
                min(x.now_cut, coalesce(x.newest_cut, x.now_cut), coalesce(x.gap_cut, x.now_cut)))
           AS cutoff,
       strftime('%Y-%m-%dT%H:%M:%fZ', x.resumed + 30 / 86400.0) AS outage_until
FROM (
    SELECT julianday('now') - 30 / 86400.0 AS now_cut,
           (SELECT CASE WHEN max(julianday(s.heartbeat_at)) > julianday('now') - 600 / 86400.0
                        THEN max(julianday(s.heartbeat_at)) - 30 / 86400.0 END
            FROM host_serves s) AS newest_cut,
           (SELECT min(julianday(s.gap_from)) - 30 / 86400.0 FROM host_serves s
            WHERE julianday(s.resumed_at) > julianday('now') - 30 / 86400.0) AS gap_cut,
           (SELECT max(julianday(s.resumed_at)) FROM host_serves s
            WHERE julianday(s.resumed_at) > julianday('now') - 30 / 86400.0) AS resumed
) AS x;

-- 3. thread_attention (V16) judges `unreachable` and `owner_gone` by that cutoff instead of
--    the plain lease; the rest is V16's, word for word.
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
                    AND julianday(b.activity_at) <= julianday('now') - b.stall_ms / 86400000.0
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
