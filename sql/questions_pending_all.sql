-- Every pending question with its thread's path, oldest first (`top`, `threadbase answer`).
SELECT q.id, q.thread_id, t.path, q.kind, q.title, q.message, q.options, q.asked_at
FROM ui_requests q JOIN threads t ON t.id = q.thread_id
WHERE q.state = 'pending'
ORDER BY q.id
