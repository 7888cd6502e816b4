-- One question by its id.
SELECT id, thread_id, request_id, kind, title, message, options, asked_at, deadline_ms, state,
       answer, answered_at, answered_by
FROM ui_requests WHERE id = ?1
