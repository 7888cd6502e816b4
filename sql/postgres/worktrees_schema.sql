-- sql/worktrees_schema.sql on PostgreSQL: from information_schema (no sqlite_schema).
SELECT count(*) FROM information_schema.tables
WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name = 'thread_worktrees'
