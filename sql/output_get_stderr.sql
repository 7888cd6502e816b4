-- The retained stderr tail and how many bytes were cut before it.
SELECT stderr_tail, stderr_dropped FROM thread_output WHERE thread_id = ?1
