-- Whether the database has the view thread_attention (schema version 16 or later); read-only
-- commands may open a database no newer serve has migrated yet.
SELECT count(*) FROM sqlite_schema WHERE type = 'view' AND name = 'thread_attention'
