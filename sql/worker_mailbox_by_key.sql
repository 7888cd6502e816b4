-- The keyed message of a thread (UNIQUE (thread_id, send_key)).
SELECT {worker_keyed_message_row} FROM mailbox WHERE thread_id = ?1 AND send_key = ?2
