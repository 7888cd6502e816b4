-- threadbase schema, version 21: no rendered answers in the database (issue 47). V8's
-- `thread_snapshots` kept still threads' answers, and its triggers (V8, V10, V16, V17) deleted
-- a thread's rows on every change of a table its answer reads. A serve now keeps the answers
-- it rendered in its own memory, dropped whenever the database changes (`engine/cache.rs`),
-- so a read writes nothing and no table needs a trigger for it. Dropping the table drops its
-- rows; the triggers go first, since they name it.
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_thread;
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_output_insert;
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_output_update;
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_output_delete;
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_usage;
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_question_insert;
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_question_update;
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_worktree;
DROP TABLE IF EXISTS thread_snapshots;
