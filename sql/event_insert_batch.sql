-- Appends a thread's events of one ingest batch in one statement: ?2 is a JSON array of
-- [seq, at, type, data] (data a JSON object). PostgreSQL runs it (its override), one round trip
-- where a statement per event would cost one each (benches/ingest.rs, the PostgreSQL run);
-- SQLite inserts row by row with event_insert.sql, a cached statement in process.
INSERT INTO thread_events (thread_id, seq, at, type, data)
SELECT ?1, j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value -> 3
FROM json_each(?2) AS j
