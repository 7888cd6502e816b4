-- `threadbase check`: pending mailbox rows of closed threads, with the thread's and the
-- manager's owner (the caller checks whether either process is still alive). Reads the partial
-- index mailbox_pending. Contract B rows are not stale: unconsumed steering is replayed when the
-- thread resumes, and notices wait for their recipient agent's serve; likewise contract A's
-- notices wait for their session's next serve (`pi --session FILE` starts one at once).
SELECT {check_stale_mailbox_row}, {check_owners_row}
FROM mailbox mb
JOIN threads t ON t.id = mb.thread_id
JOIN managers m ON m.id = t.manager_id
WHERE mb.state = 'pending' AND t.status = 'closed' AND m.contract <> 'agent'
  AND NOT (m.contract = 'thread' AND mb.kind = 'notice')
ORDER BY mb.id
