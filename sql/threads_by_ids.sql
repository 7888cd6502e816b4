-- The threads among the ids in the JSON array ?1 that exist, in the array's order: the listed
-- threads without a kept answer (a list's statements return only a thread's id, path and status
-- beside its kept answer), read once per batch, and the rows the snapshot cache's filler
-- renders (it keeps only the still ones). A primary-key lookup per id.
SELECT {thread_row}
FROM json_each(?1) AS j
JOIN threads AS t ON t.id = j.value
ORDER BY j.key
