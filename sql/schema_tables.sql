-- Opening a database: the names of its own tables (SQLite's internal ones aside), to tell a
-- threadbase database from an empty file or another program's database before reading or
-- migrating it. Reads the schema page only.
SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name
