-- The first threads of a manager in list order, for the unknown-reference error text.
SELECT * FROM thread_rows
WHERE manager_id = ?1 ORDER BY sort_key LIMIT ?2
