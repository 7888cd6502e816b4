-- Where each thread is held, for the team views (`tree`, `list`, `top`, `usage`): the host its
-- row records, its serve's (a row not launched yet: its manager's serve's, the holder rule of
-- sql/thread_holder.sql). Rows that record none (written before V13) are left out. One pass
-- over threads and a primary-key lookup of each one's manager: those views read every thread.
SELECT t.id, CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END AS host_id
FROM threads t
JOIN managers m ON m.id = t.manager_id
WHERE CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END IS NOT NULL
