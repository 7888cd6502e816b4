-- A mailbox row of any contract: contract B's steer for a child or notice for a parent agent
-- (recipient_path), contract C's keyed prompt, message or report notice (message_id). The send
-- key makes one row per thread and key: a second is not written (no id is returned), and the caller compares it
-- in the same transaction if it must. A row a request of the writing serve reports itself is
-- written delivered.
INSERT INTO mailbox (thread_id, direction, kind, send_key, message_id, body, recipient_path,
                     created_at, state, delivered_at)
VALUES (:thread_id, :direction, :kind, :send_key, :message_id, :body, :recipient, :at,
        :state, CASE WHEN :state = 'delivered' THEN :at END)
ON CONFLICT (thread_id, send_key) DO NOTHING
RETURNING id
