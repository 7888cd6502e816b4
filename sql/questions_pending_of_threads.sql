-- The oldest pending question of each thread in the JSON array ?1, by position in that array
-- (a list's batch); no row for a thread without one. Per id, the first entry of its range of
-- ui_requests_pending (the index holds the rowid, so its first entry is the oldest), then that
-- row by primary key: the row sql/question_pending.sql reads for one id.
SELECT {batch_row}, {question_row}
FROM json_each(?1) AS j
JOIN ui_requests AS r ON r.id = (SELECT p.id FROM ui_requests AS p
                                 WHERE p.thread_id = j.value AND p.state = 'pending'
                                 ORDER BY p.id LIMIT 1)
