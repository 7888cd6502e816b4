-- The first threads of a manager in list order, for the unknown-reference error text.
SELECT {thread_row}
FROM threads t
WHERE manager_id = ?1 ORDER BY sort_key LIMIT ?2
