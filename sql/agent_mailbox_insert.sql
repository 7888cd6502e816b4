-- A contract B mailbox row (a steer for a child, or a notice for a parent agent), written
-- before it is delivered. The send key makes a settlement's notice exactly one row. A
-- settlement that a request of the writing serve reports itself is written delivered.
INSERT INTO mailbox (thread_id, direction, kind, send_key, body, recipient_path, created_at,
                     state, delivered_at)
VALUES (:thread_id, :direction, :kind, :send_key, :body, :recipient, :at,
        :state, CASE WHEN :state = 'delivered' THEN :at END)
ON CONFLICT (thread_id, send_key) DO NOTHING
