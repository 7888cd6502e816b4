-- sql/check_is_threadbase.sql on PostgreSQL: the tables of the connection's schema are in
-- information_schema (there is no sqlite_schema).
SELECT count(*) FROM information_schema.tables
WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
  AND table_name IN ('threads', 'thread_events', 'managers')
