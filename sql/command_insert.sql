-- A contract A request for the serve that holds (or, for a resume, manages) a thread: its
-- row watcher carries it out and records the outcome in `result`.
INSERT INTO commands (thread_id, kind, payload, created_at) VALUES (?1, ?2, ?3, ?4) RETURNING id
