-- sql/host_serves_prune.sql on PostgreSQL: the heartbeat's ISO text cast to timestamptz and
-- compared with the server's clock, for SQLite's julianday.
DELETE FROM host_serves
WHERE host_id = :host
  AND CAST(heartbeat_at AS timestamptz) < clock_timestamp() - :secs * interval '1 second'
