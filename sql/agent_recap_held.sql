-- The results held back for :recipient's final recap, oldest first (partial index
-- mailbox_agent_notices: the pending notices of one recipient).
SELECT {agent_held_row}
FROM mailbox mb JOIN threads t ON t.id = mb.thread_id
WHERE mb.state = 'pending' AND mb.recipient_path = :recipient AND mb.recap_held = 1
  AND t.manager_id = :registry
ORDER BY mb.id
