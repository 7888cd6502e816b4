-- sql/questions_pending_of_threads.sql on PostgreSQL: the JSON array ?1 is read with
-- jsonb_array_elements_text WITH ORDINALITY (json_each's key is the 0-based position).
SELECT {batch_row}, {question_row}
FROM (SELECT value, ord - 1 AS key
      FROM jsonb_array_elements_text(CAST(?1 AS jsonb)) WITH ORDINALITY AS a (value, ord)) AS j
JOIN ui_requests AS r ON r.id = (SELECT p.id FROM ui_requests AS p
                                 WHERE p.thread_id = j.value AND p.state = 'pending'
                                 ORDER BY p.id LIMIT 1)
