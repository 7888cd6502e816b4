-- Reference resolution step 3: threads whose task name (always the path basename) equals the
-- text, in list order; LIMIT keeps an ambiguity report bounded.
SELECT {thread_row}
FROM threads t
WHERE manager_id = ?1 AND task_name = ?2 ORDER BY sort_key LIMIT ?3
