-- `threadbase host list`: every host with a serve row, its newest boot, last heartbeat, how many
-- of its serves beat after the lease's cutoff (:cutoff, the heartbeats' ISO text: host_lease's,
-- or the plain lease before V20) and its live threads. A handful of rows; each host's live
-- threads are counted among the live rows.
SELECT {host_row}
FROM host_serves h
GROUP BY h.host_id
ORDER BY h.host_id
