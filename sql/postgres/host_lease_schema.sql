-- sql/host_lease_schema.sql on PostgreSQL: from information_schema (no sqlite_schema).
SELECT count(*) FROM information_schema.views
WHERE table_schema = current_schema() AND table_name = 'host_lease'
