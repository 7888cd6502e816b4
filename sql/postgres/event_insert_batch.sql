-- PostgreSQL: json_each is SQLite's; jsonb_array_elements walks the array, and data goes in as
-- the jsonb element itself.
INSERT INTO thread_events (thread_id, seq, at, type, data)
SELECT ?1, (e ->> 0)::bigint, e ->> 1, e ->> 2, e -> 3
FROM jsonb_array_elements(?2::jsonb) AS e
