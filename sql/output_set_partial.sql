-- The assistant text streamed so far in the current message (latest value per batch).
UPDATE thread_output SET last_partial_text = ?2 WHERE thread_id = ?1
