-- A stop, forced stop or interrupt for the serve that holds a thread's process (`threadbase
-- top`, `threadbase stop`, contract B's stop and contract C's interrupt across serves); its
-- watcher carries it out at once and records the outcome.
INSERT INTO commands (thread_id, kind, created_at) VALUES (?1, ?2, ?3)
