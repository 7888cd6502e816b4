-- sql/thread_host_lease.sql on PostgreSQL: the heartbeat's ISO text cast to timestamptz and
-- compared with the server's clock, for SQLite's julianday.
SELECT h.host_id, max(h.heartbeat_at) AS last_heartbeat,
       sum(CASE WHEN CAST(h.heartbeat_at AS timestamptz)
                     > clock_timestamp() - :secs * interval '1 second' THEN 1 ELSE 0 END) AS serves_up
FROM threads t
JOIN managers m ON m.id = t.manager_id
JOIN host_serves h
  ON h.host_id = CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END
WHERE t.id = :id
GROUP BY h.host_id
