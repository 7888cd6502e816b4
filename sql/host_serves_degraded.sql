-- `threadbase host list`: the serves whose heartbeat has not lapsed (after the lease's cutoff,
-- :cutoff, as host_list's) and whose last heartbeat said their supervision is not running
-- (V21's degraded_since, degraded_reason): their host, pid, since when and why. host_serves
-- holds a row per serve.
SELECT h.host_id, h.pid, h.degraded_since, h.degraded_reason
FROM host_serves h
WHERE h.degraded_since IS NOT NULL AND h.heartbeat_at > :cutoff
ORDER BY h.host_id, h.pid
