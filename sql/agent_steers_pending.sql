-- A thread's steering messages not yet consumed, oldest first (mailbox_pending index);
-- message_id holds the launch they were sent to, NULL while unsent.
SELECT {agent_steer_row} FROM mailbox
WHERE thread_id = ?1 AND state = 'pending' AND direction = 'to_child'
ORDER BY id
