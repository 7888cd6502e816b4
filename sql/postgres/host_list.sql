-- sql/host_list.sql on PostgreSQL: the heartbeat's ISO text cast to timestamptz and compared
-- with the server's clock, for SQLite's julianday (the columns of {host_row}, in order).
SELECT h.host_id,
       (SELECT s.boot_id FROM host_serves s WHERE s.host_id = h.host_id
        ORDER BY s.heartbeat_at DESC LIMIT 1) AS boot_id,
       max(h.heartbeat_at) AS last_heartbeat,
       sum(CASE WHEN CAST(h.heartbeat_at AS timestamptz)
                     > clock_timestamp() - :secs * interval '1 second' THEN 1 ELSE 0 END) AS serves_up,
       (SELECT count(*) FROM threads t WHERE t.status = 'live' AND t.host_id = h.host_id) AS live_threads
FROM host_serves h
GROUP BY h.host_id
ORDER BY h.host_id
