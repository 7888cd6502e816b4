-- A tool result already gave the caller this thread's settled view (a blocking agent_spawn,
-- agent_wait or agent_stop, or a failed spawn's error): its pending notices for that caller
-- say nothing new, so they are marked delivered without being sent (index mailbox_pending).
-- A timeout notice is not news the result gave (0.19 sends it whenever the timer fires while
-- the child works): it stays pending for the row watcher to send.
UPDATE mailbox SET state = 'delivered', delivered_at = :at
WHERE state = 'pending' AND thread_id = :id AND direction = 'to_parent'
  AND recipient_path = :recipient AND (send_key IS NULL OR send_key NOT LIKE 'timeout:%')
