-- `threadbase check`: whether the file holds threadbase's schema (the threads table exists).
SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('threads', 'thread_events', 'managers')
