-- sql/outputs_of_threads.sql on PostgreSQL: the JSON array ?1 is read with
-- jsonb_array_elements_text WITH ORDINALITY (json_each's key is the 0-based position).
SELECT (j.ord - 1), o.last_assistant_text, o.last_partial_text, o.stderr_tail, o.stderr_dropped,
       o.session_name, o.pending_message_count
FROM jsonb_array_elements_text(CAST(?1 AS jsonb)) WITH ORDINALITY AS j (value, ord) JOIN thread_output AS o ON o.thread_id = j.value
