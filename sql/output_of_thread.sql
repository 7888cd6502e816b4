-- A thread's retained output.
SELECT last_assistant_text, last_partial_text, stderr_tail, stderr_dropped, session_name,
       pending_message_count
FROM thread_output WHERE thread_id = ?1
