-- sql/hosts_recorded.sql on PostgreSQL: from information_schema (no pragma_table_info).
SELECT count(*) FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = 'threads' AND column_name = 'host_id'
