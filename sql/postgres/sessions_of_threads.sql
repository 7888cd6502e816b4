-- sql/sessions_of_threads.sql on PostgreSQL: the JSON array ?1 is read with
-- jsonb_array_elements_text WITH ORDINALITY (json_each's key is the 0-based position).
SELECT {thread_sessions_row}
FROM jsonb_array_elements_text(CAST(?1 AS jsonb)) WITH ORDINALITY AS j (value, ord)
JOIN threads t ON t.id = j.value
JOIN managers m ON m.id = t.manager_id
LEFT JOIN thread_places p ON p.thread_id = t.id
