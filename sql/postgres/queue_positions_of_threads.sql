-- sql/queue_positions_of_threads.sql on PostgreSQL: the JSON array ?1 is read with
-- jsonb_array_elements_text WITH ORDINALITY (json_each's key is the 0-based position).
SELECT (j.ord - 1),
       (SELECT count(*) FROM threads q
        WHERE q.manager_id = t.manager_id AND q.queued_at IS NOT NULL AND q.dequeued_at IS NULL
          AND q.status = 'live' AND q.rowid <= t.rowid)
FROM jsonb_array_elements_text(CAST(?1 AS jsonb)) WITH ORDINALITY AS j (value, ord) JOIN threads AS t ON t.id = j.value
WHERE t.queued_at IS NOT NULL AND t.dequeued_at IS NULL AND t.status = 'live'
