-- The thread row (store::threads::ThreadRow): the columns of store::threads::col, in that
-- order, once for every query that returns thread rows (sql/thread_by_*.sql, threads_by_ids.sql,
-- reach_*.sql, …: they select `*` or `t.*` of this view; contract A's list_*.sql select only
-- `t.id, t.path, t.status`). Last comes `sort_key`, the list order
-- key their WHERE and ORDER BY use (a view is filtered and sorted only by what it selects);
-- ThreadRow does not read it. Naming the columns keeps SQLite from copying out the rest of
-- `threads` (prompt, output, …). SQLite flattens the view into each query, so their plans are
-- those of the same query on `threads t`. A TEMP view, made by every connection the store opens
-- (store::create_views), so it is this build's row whatever migration the file is at.
CREATE TEMP VIEW thread_rows AS
SELECT t.id, t.manager_id, t.path, t.parent_path, t.parent_id, t.task_name, t.name, t.depth,
       t.cwd, t.args, t.status, t.phase, t.agent_state, t.exit_kind, t.exit_code, t.exit_signal,
       t.exit_message, t.archived, t.hidden, t.session_file, t.session_id, t.pid, t.pgid,
       t.owner_pid, t.last_seq, t.created_at, t.last_event_at, t.owner_started_at, t.sort_key
FROM threads t
