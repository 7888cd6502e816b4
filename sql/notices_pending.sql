-- Messages due to a manager's caller (completion, progress, worker reports), oldest first.
-- Read from the partial index mailbox_pending (only pending rows), each row's thread and
-- manager then found by primary key: the watcher runs this after every commit, so its cost
-- follows the pending messages, never the manager's threads (CROSS JOIN keeps that order).
-- Contract B notices (recipient_path set) go to an agent path instead: agent_notices_pending.sql.
SELECT {notice_row}
FROM mailbox mb INDEXED BY mailbox_pending
CROSS JOIN threads t ON t.id = mb.thread_id
CROSS JOIN managers m ON m.id = t.manager_id
WHERE mb.state = 'pending' AND mb.direction = 'to_parent' AND m.session_id = ?1
  AND mb.recipient_path IS NULL
ORDER BY mb.id
