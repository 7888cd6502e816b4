-- Threads of a registry owned by this serve with steering messages not yet sent to their
-- current launch. Read from the partial index mailbox_pending (only pending rows), each
-- row's thread then found by primary key, so the cost follows the pending messages, not the
-- registry's threads (CROSS JOIN keeps that order).
SELECT DISTINCT t.id FROM mailbox mb INDEXED BY mailbox_pending
CROSS JOIN threads t ON t.id = mb.thread_id
WHERE mb.state = 'pending' AND mb.direction = 'to_child' AND t.manager_id = ?1
  AND t.owner_pid = ?2 AND t.owner_started_at = ?3
  -- On this host and boot: a serve elsewhere may have the same pid and start.
  AND (t.host_id IS NULL OR t.host_id = ?4) AND (t.boot_id IS NULL OR t.boot_id = ?5)
  AND (mb.message_id IS NULL OR mb.message_id <> CAST(t.launch_seq AS TEXT) OR t.status = 'closed')
