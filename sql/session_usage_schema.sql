-- Whether the database keeps root sessions' own turns (schema version 9 or later); read-only
-- commands may open a database no newer serve has migrated yet.
SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'session_usage'
