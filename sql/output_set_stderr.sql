-- Replaces the retained stderr tail.
UPDATE thread_output SET stderr_tail = ?2, stderr_dropped = ?3 WHERE thread_id = ?1
