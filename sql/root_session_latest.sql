-- `--session latest` (and `--latest`): the root session whose threads saw the most recent
-- activity (a thread's later of created_at and last_event_at). Reads every placed thread once
-- (no index orders threads by time; list and tree, which take it, read every thread anyway).
SELECT p.root_session
FROM thread_places p
JOIN threads t ON t.id = p.thread_id
ORDER BY max(t.created_at, t.last_event_at) DESC, p.root_session DESC
LIMIT 1
