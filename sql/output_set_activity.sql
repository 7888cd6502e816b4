-- When the child last said anything (issue 45: a busy thread silent past its manager's
-- stall_ms reads `stalled`); written at most once a second per thread.
UPDATE thread_output SET activity_at = ?2 WHERE thread_id = ?1
