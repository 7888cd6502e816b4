-- A tool result already gave the caller this thread's settled view (a blocking agent_spawn,
-- agent_wait or agent_stop, or a failed spawn's error): its pending notices for that caller
-- say nothing new, so they are marked delivered without being sent (index mailbox_pending).
UPDATE mailbox SET state = 'delivered', delivered_at = :at
WHERE state = 'pending' AND thread_id = :id AND direction = 'to_parent'
  AND recipient_path = :recipient
