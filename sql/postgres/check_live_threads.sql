-- sql/check_live_threads.sql on PostgreSQL: the row's age is its ISO text cast to timestamptz
-- and an epoch difference instead of julianday (NULL when created_at is not such a text,
-- where julianday gives NULL too).
SELECT t.id, t.path, t.phase, t.pid,
       CASE WHEN t.owner_pid IS NOT NULL THEN t.owner_pid ELSE m.owner_pid END AS owner_pid,
       CASE WHEN t.owner_pid IS NOT NULL THEN t.owner_started_at ELSE m.owner_started_at END AS owner_started_at,
       CASE WHEN t.created_at ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$'
            THEN extract(epoch FROM clock_timestamp()
                         - CAST(t.created_at AS timestamptz))::double precision END AS age_s,
       m.session_id, t.process_started_at,
       CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END AS host_id,
       CASE WHEN t.owner_pid IS NOT NULL THEN t.boot_id ELSE m.boot_id END AS boot_id
FROM threads t JOIN managers m ON m.id = t.manager_id
WHERE t.status = 'live'
  -- A queued row never launched (THREADBASE_QUEUE=1) claims no process: it waits for a slot.
  AND NOT (t.queued_at IS NOT NULL AND t.launch_seq = 0)
