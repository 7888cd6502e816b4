-- The queue position of each thread in the JSON array ?1 that waits for a slot (1 = launched
-- next), as sql/queue_position.sql counts it: its id and position; a thread not waiting has no
-- row. A primary-key lookup per id, then a count of its manager's waiting rows reserved before
-- it (threads_queue_waiting). For a list batch's facts: one query whatever the batch's size.
SELECT t.id,
       (SELECT count(*) FROM threads q
        WHERE q.manager_id = t.manager_id AND q.queued_at IS NOT NULL AND q.dequeued_at IS NULL
          AND q.status = 'live' AND q.rowid <= t.rowid)
FROM json_each(?1) AS j
JOIN threads t ON t.id = j.value
WHERE t.queued_at IS NOT NULL AND t.dequeued_at IS NULL AND t.status = 'live'
