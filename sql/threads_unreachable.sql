-- Of the threads in the JSON array ?1 (a poll's one, a list's batch), by position in that
-- array, the live ones held on a host whose lease ran out: the host and its last heartbeat
-- (when it became unreachable), once no serve of it beat after the lease's cutoff (the view
-- host_lease: a lease before now, moved back while the database may just have come back from
-- an outage). No row for the others, nor for a host with no serve row (its serves ended,
-- or it was forgotten): nothing is known against it. Each id is a primary-key lookup of
-- threads and of its manager, then the host's few rows of host_serves (its primary key).
SELECT {batch_row}, {unreachable_row}
FROM json_each(?1) AS j
JOIN threads AS t ON t.id = j.value
JOIN managers AS m ON m.id = t.manager_id
JOIN host_serves AS h
  ON h.host_id = CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END
WHERE t.status = 'live'
GROUP BY j.key, h.host_id
HAVING max(h.heartbeat_at) <= (SELECT l.cutoff FROM host_lease l)
