-- A child's dialog waiting for its parent's answer (THREADBASE_UI=parent).
INSERT INTO ui_requests (thread_id, launch_seq, request_id, kind, title, message, options,
                         asked_at, deadline_ms)
VALUES (:thread, :launch, :request, :kind, :title, :message, :options, :at, :deadline)
RETURNING id
