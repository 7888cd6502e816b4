-- Whether the database has thread_worktrees (schema version 17 or later); read-only commands
-- may open a database no newer serve has migrated yet.
SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'thread_worktrees'
