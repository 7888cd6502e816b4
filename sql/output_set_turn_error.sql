-- The last turn's error (its first line) and when it came, or NULL for both when a new turn
-- began (issue 45: a live, idle thread whose last turn failed reads `failed`).
UPDATE thread_output SET turn_error = ?2, turn_error_at = ?3 WHERE thread_id = ?1
