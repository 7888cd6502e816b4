-- sql/queue_positions_of_threads.sql on PostgreSQL: the JSON array ?1 is read with
-- jsonb_array_elements_text WITH ORDINALITY (json_each's key is the 0-based position).
SELECT {batch_row}, {queue_position_row}
FROM (SELECT value, ord - 1 AS key
      FROM jsonb_array_elements_text(CAST(?1 AS jsonb)) WITH ORDINALITY AS a (value, ord)) AS j JOIN threads AS t ON t.id = j.value
WHERE t.queued_at IS NOT NULL AND t.dequeued_at IS NULL AND t.status = 'live'
