-- The serves whose heartbeat has not lapsed (after the lease's cutoff, the view host_lease):
-- their host, boot, pid, start and PID space. No pass closes a thread such a serve owns unless
-- this process can see that serve is gone (issue 46), and a serve starting under a host id
-- that such a serve of another boot or PID space holds refuses to start. host_serves holds a
-- row per serve.
SELECT h.host_id, h.boot_id, h.pid, h.started_at, h.pid_ns, h.heartbeat_at
FROM host_serves h CROSS JOIN host_lease l
WHERE h.heartbeat_at > l.cutoff
ORDER BY h.host_id, h.heartbeat_at DESC
