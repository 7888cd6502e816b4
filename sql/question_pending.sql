-- A thread's oldest pending question (ui_requests_pending).
SELECT id, thread_id, request_id, kind, title, message, options, asked_at, deadline_ms, state,
       answer, answered_at, answered_by
FROM ui_requests WHERE thread_id = ?1 AND state = 'pending'
ORDER BY id LIMIT 1
