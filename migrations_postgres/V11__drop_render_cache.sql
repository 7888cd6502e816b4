-- threadbase PostgreSQL schema, version 10 (SQLite's version 21): no rendered answers in the
-- database (issue 47). A serve keeps the answers it rendered in its own memory, dropped
-- whenever a change notification arrives (`engine/cache.rs`); see SQLite's V21. The triggers
-- and their functions go first, then the table and its rows.
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_thread ON threads;
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_output_insert ON thread_output;
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_output_update ON thread_output;
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_output_delete ON thread_output;
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_usage ON thread_usage;
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_question_insert ON ui_requests;
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_question_update ON ui_requests;
DROP TRIGGER IF EXISTS thread_snapshots_stale_on_worktree ON thread_worktrees;
DROP FUNCTION IF EXISTS thread_snapshots_stale_on_thread();
DROP FUNCTION IF EXISTS thread_snapshots_stale_on_output_insert();
DROP FUNCTION IF EXISTS thread_snapshots_stale_on_output_update();
DROP FUNCTION IF EXISTS thread_snapshots_stale_on_output_delete();
DROP FUNCTION IF EXISTS thread_snapshots_stale_on_usage();
DROP FUNCTION IF EXISTS thread_snapshots_stale_on_question();
DROP FUNCTION IF EXISTS thread_snapshots_stale_on_worktree();
DROP TABLE IF EXISTS thread_snapshots;
