-- The newest assistant message or error event of a thread: tells a completed run from one that
-- ended with a model error.
SELECT {agent_last_outcome_row} FROM thread_events
WHERE thread_id = ?1 AND type IN ('assistant_message', 'thread_error')
ORDER BY seq DESC LIMIT 1
