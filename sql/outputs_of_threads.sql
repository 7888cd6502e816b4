-- The retained output of the threads in the JSON array ?1, by position in that array (a list's
-- batch): one primary-key lookup of thread_output per id.
SELECT j.key, o.last_assistant_text, o.last_partial_text, o.stderr_tail, o.stderr_dropped,
       o.session_name, o.pending_message_count
FROM json_each(?1) AS j JOIN thread_output AS o ON o.thread_id = j.value
