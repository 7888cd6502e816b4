-- Whether a turn_started has been recorded without its turn_completed (dedupes turn events
-- across a restart of the runtime).
UPDATE thread_output SET turn_open = ?2 WHERE thread_id = ?1
