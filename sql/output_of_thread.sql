-- A thread's retained output.
SELECT last_assistant_text, last_partial_text, stderr_tail, stderr_dropped FROM thread_output WHERE thread_id = ?1
