-- sql/questions_pending_of_threads.sql on PostgreSQL: the JSON array ?1 is read with
-- jsonb_array_elements_text WITH ORDINALITY (json_each's key is the 0-based position).
SELECT (j.ord - 1) AS at, r.id, r.thread_id, r.request_id, r.kind, r.title, r.message, r.options,
       r.asked_at, r.deadline_ms, r.state, r.answer, r.answered_at, r.answered_by
FROM jsonb_array_elements_text(CAST(?1 AS jsonb)) WITH ORDINALITY AS j (value, ord)
JOIN ui_requests AS r ON r.id = (SELECT p.id FROM ui_requests AS p
                                 WHERE p.thread_id = j.value AND p.state = 'pending'
                                 ORDER BY p.id LIMIT 1)
