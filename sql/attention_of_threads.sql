-- What needs the user about each thread of the JSON array ?1 (a poll's one, a list's batch),
-- by position in that array: the row of the view thread_attention (V16), none for a thread
-- that needs nothing. The join pushes the id into the view, so each id costs its primary-key
-- lookups (threads, managers, thread_output, its oldest pending question, its owner's
-- heartbeat row) and one read of host_serves, a row per serve.
SELECT {batch_row}, {attention_row}
FROM json_each(?1) AS j
JOIN thread_attention AS a ON a.thread_id = j.value
