-- threadbase schema, version 14: no more kept answers (issue 26, "one list path").
--
-- V8's `thread_snapshots` kept still threads' rendered answers, keyed by a hash of the
-- build's whole source, and its triggers (V8's on `threads` and `thread_output`, V10's on
-- `thread_usage`) deleted a thread's rows on any change of them. A list and a poll now render
-- each thread from its rows as they read them (`contract::list_answer`, `contract::thread::
-- poll_result`), which meets the serve targets on their own (see ARCHITECTURE.md, "Known
-- gaps"), so the table, its triggers and the rule they kept are gone. Nothing else read them.
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_thread;
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_output_insert;
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_output_update;
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_output_delete;
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_usage;
DROP TABLE IF EXISTS thread_snapshots;
