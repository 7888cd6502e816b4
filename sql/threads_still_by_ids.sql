-- The still threads (closed, or live and idle) among the ids in the JSON array ?1, in the
-- array's order (the snapshot cache's filler renders only those): a primary-key lookup per id.
SELECT t.*
FROM json_each(?1) AS j
JOIN thread_rows AS t ON t.id = j.value
WHERE t.status = 'closed' OR t.phase = 'idle'
ORDER BY j.key
