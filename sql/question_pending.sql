-- A thread's oldest pending question (ui_requests_pending).
SELECT {question_row}
FROM ui_requests r WHERE thread_id = ?1 AND state = 'pending'
ORDER BY id LIMIT 1
