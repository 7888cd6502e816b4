-- sql/threads_unreachable.sql on PostgreSQL: the JSON array ?1 read with
-- jsonb_array_elements_text WITH ORDINALITY (json_each's key is the 0-based position).
SELECT {batch_row}, {unreachable_row}
FROM (SELECT value, ord - 1 AS key
      FROM jsonb_array_elements_text(CAST(?1 AS jsonb)) WITH ORDINALITY AS a (value, ord)) AS j
JOIN threads AS t ON t.id = j.value
JOIN managers AS m ON m.id = t.manager_id
JOIN host_serves AS h
  ON h.host_id = CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END
WHERE t.status = 'live'
GROUP BY j.key, h.host_id
HAVING max(h.heartbeat_at) <= (SELECT l.cutoff FROM host_lease l)
