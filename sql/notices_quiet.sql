-- A `wait` of the notice's own session reported the thread's settled or closed state: its
-- pending contract A notices were given by that result and are not sent again. Found through
-- the partial index mailbox_pending (thread_id, id), which holds only pending rows.
UPDATE mailbox SET state = 'delivered', delivered_at = ?2
WHERE thread_id = ?1 AND state = 'pending' AND direction = 'to_parent' AND kind = 'notice'
  AND recipient_path IS NULL
