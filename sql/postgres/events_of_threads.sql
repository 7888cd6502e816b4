-- sql/events_of_threads.sql on PostgreSQL: the JSON array of ids ?1 is read with
-- jsonb_array_elements_text WITH ORDINALITY (json_each's key is the 0-based position).
SELECT {batch_row}, {event_row}
FROM (SELECT value, ord - 1 AS key
      FROM jsonb_array_elements_text(CAST(?1 AS jsonb)) WITH ORDINALITY AS a (value, ord)) AS j
JOIN threads AS t ON t.id = j.value
JOIN thread_events AS e ON e.thread_id = t.id AND e.seq > t.last_seq - ?2
