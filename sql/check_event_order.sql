-- `threadbase check`: events whose seq is lower than that of an event with an earlier `at` in the
-- same thread (seq must grow with time). Sorting by (at, seq) makes any inversion adjacent.
SELECT {check_event_order_row}
FROM (SELECT thread_id, seq, at,
             lag(seq) OVER w AS prev_seq, lag(at) OVER w AS prev_at
      FROM thread_events
      WINDOW w AS (PARTITION BY thread_id ORDER BY at, seq))
WHERE prev_seq IS NOT NULL AND seq < prev_seq
