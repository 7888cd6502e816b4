-- The latest complete assistant text; the live partial text ends with it.
UPDATE thread_output SET last_assistant_text = ?2, last_partial_text = NULL WHERE thread_id = ?1
