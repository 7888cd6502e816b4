-- `threadbase check`: threads whose last_seq is below the highest stored event seq (the next
-- append would collide with or reorder existing events). Primary-key range per thread.
SELECT {check_last_seq_row}
FROM threads t
JOIN (SELECT thread_id, max(seq) AS max_seq FROM thread_events GROUP BY thread_id) e
  ON e.thread_id = t.id
WHERE t.last_seq < e.max_seq
