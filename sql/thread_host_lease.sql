-- The host that holds a thread (:id; its serve, or its manager's for a row not launched yet) and
-- that host's lease: its last heartbeat and how many of its serves beat after the lease's cutoff
-- (the view host_lease: a lease before now, moved back while the database may just have come
-- back from an outage). No row when the host is not recorded or has no serve row.
SELECT h.host_id, max(h.heartbeat_at) AS last_heartbeat,
       sum(CASE WHEN h.heartbeat_at > l.cutoff THEN 1 ELSE 0 END) AS serves_up
FROM threads t
JOIN managers m ON m.id = t.manager_id
JOIN host_serves h
  ON h.host_id = CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END
CROSS JOIN host_lease l
WHERE t.id = :id
GROUP BY h.host_id
