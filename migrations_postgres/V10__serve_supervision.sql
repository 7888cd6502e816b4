-- threadbase PostgreSQL schema, version 10 (SQLite's version 21): a serve whose supervision is
-- not running says so in its heartbeat row (issue 46). The same columns as SQLite's V21; see
-- its comments.
ALTER TABLE host_serves ADD COLUMN degraded_since text COLLATE "C";
ALTER TABLE host_serves ADD COLUMN degraded_reason text COLLATE "C";
