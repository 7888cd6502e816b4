-- Keeps the newest 40 events of a thread (a primary-key range delete).
DELETE FROM thread_events WHERE thread_id = ?1 AND seq <= ?2 - 40
