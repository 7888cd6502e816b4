-- The host that holds (or held) one thread (?1), as sql/thread_hosts.sql reads it for every
-- thread: for `threadbase show`. Two primary-key lookups.
SELECT t.id, CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END AS host_id
FROM threads t
JOIN managers m ON m.id = t.manager_id
WHERE t.id = ?1
  AND CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END IS NOT NULL
