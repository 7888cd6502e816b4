-- The host ids held at once by serves of more than one machine or PID space (issue 46): among
-- the serve rows whose heartbeat has not lapsed (the view host_lease), more than one boot, or
-- more than one PID space of one boot. Such a host id is not unique: each machine or container
-- needs a THREADBASE_HOST_ID of its own. host_serves holds a row per serve.
SELECT h.host_id, count(DISTINCT h.boot_id) AS boots,
       count(DISTINCT h.boot_id || ' ' || coalesce(h.pid_ns, '')) AS spaces
FROM host_serves h CROSS JOIN host_lease l
WHERE h.heartbeat_at > l.cutoff
GROUP BY h.host_id
HAVING count(DISTINCT h.boot_id || ' ' || coalesce(h.pid_ns, '')) > 1
ORDER BY h.host_id
