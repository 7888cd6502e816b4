-- The root session and manager session of each thread in the JSON array ?1 (an ambiguity
-- report names its candidates by session): primary-key lookups per id.
SELECT {thread_sessions_row}
FROM json_each(?1) j
JOIN threads t ON t.id = j.value
JOIN managers m ON m.id = t.manager_id
LEFT JOIN thread_places p ON p.thread_id = t.id
