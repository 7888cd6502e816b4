-- The manager session of each thread in the JSON array ?1, on a database before V4 (no
-- places: no root session): primary-key lookups per id.
SELECT {thread_managers_row}
FROM json_each(?1) j
JOIN threads t ON t.id = j.value
JOIN managers m ON m.id = t.manager_id
