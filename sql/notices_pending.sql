-- Messages due to a manager's caller (completion, progress, worker reports), oldest first.
-- The partial index mailbox_pending holds only pending rows, so this stays small. Contract B
-- notices (recipient_path set) go to an agent path instead: agent_notices_pending.sql.
SELECT mb.id, mb.thread_id, mb.kind, mb.message_id, mb.body, mb.created_at, t.path
FROM mailbox mb
JOIN threads t ON t.id = mb.thread_id
JOIN managers m ON m.id = t.manager_id
WHERE mb.state = 'pending' AND mb.direction = 'to_parent' AND m.session_id = ?1
  AND mb.recipient_path IS NULL
ORDER BY mb.id
