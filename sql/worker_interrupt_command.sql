-- A control request for the serve that owns a thread's process (carried out by its watcher).
INSERT INTO commands (thread_id, kind, created_at) VALUES (?1, 'interrupt', ?2)
