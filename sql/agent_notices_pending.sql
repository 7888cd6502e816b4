-- Notices due to one agent path of a registry, oldest first (partial index mailbox_agent_notices);
-- results held back for the final recap wait for it.
SELECT {agent_notice_row}
FROM mailbox mb JOIN threads t ON t.id = mb.thread_id
WHERE mb.state = 'pending' AND mb.recipient_path = ?2 AND t.manager_id = ?1
  AND mb.recap_held = 0
ORDER BY mb.id
