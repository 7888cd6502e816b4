-- `threadbase check`: events whose thread row does not exist, counted per missing thread id.
SELECT {check_orphan_events_row}
FROM thread_events e
WHERE NOT EXISTS (SELECT 1 FROM threads t WHERE t.id = e.thread_id)
GROUP BY e.thread_id
