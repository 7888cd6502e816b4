-- Appends one lifecycle event.
INSERT INTO thread_events (thread_id, seq, at, type, data) VALUES (?1, ?2, ?3, ?4, ?5)
