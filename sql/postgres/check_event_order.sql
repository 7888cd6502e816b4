-- sql/check_event_order.sql on PostgreSQL: a subquery in FROM needs an alias.
SELECT {check_event_order_row}
FROM (SELECT thread_id, seq, at,
             lag(seq) OVER w AS prev_seq, lag(at) OVER w AS prev_at
      FROM thread_events
      WINDOW w AS (PARTITION BY thread_id ORDER BY at, seq)) AS ordered
WHERE prev_seq IS NOT NULL AND seq < prev_seq
