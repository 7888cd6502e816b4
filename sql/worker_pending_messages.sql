-- Contract C: messages admitted for a worker and not yet accepted by its process, in order
-- (the partial index mailbox_pending holds exactly the pending rows).
SELECT {worker_pending_message_row} FROM mailbox
WHERE thread_id = ?1 AND state = 'pending' AND direction = 'to_child'
ORDER BY id
