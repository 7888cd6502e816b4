-- The queue position (1 = launched next) of each thread in the JSON array ?1 that waits for a
-- slot, by position in that array (a list's batch); no row for the others. Each id is one
-- primary-key lookup of threads, and each waiting one counts the waiting rows of its manager
-- reserved before it (threads_queue_waiting), as sql/queue_position.sql does for one id.
SELECT {batch_row}, {queue_position_row}
FROM json_each(?1) AS j JOIN threads AS t ON t.id = j.value
WHERE t.queued_at IS NOT NULL AND t.dequeued_at IS NULL AND t.status = 'live'
