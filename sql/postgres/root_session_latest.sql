-- sql/root_session_latest.sql on PostgreSQL: two-argument max is greatest.
SELECT p.root_session
FROM thread_places p
JOIN threads t ON t.id = p.thread_id
ORDER BY greatest(t.created_at, t.last_event_at) DESC, p.root_session DESC
LIMIT 1
