-- sql/schema_tables.sql on PostgreSQL: the tables of the connection's schema, from
-- information_schema (there is no sqlite_schema, and no internal tables to leave out).
SELECT table_name AS name FROM information_schema.tables
WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
ORDER BY table_name
