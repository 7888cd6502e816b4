-- A contract B mailbox row (a steer for a child, or a notice for a parent agent), written
-- before it is delivered. The send key makes a settlement's notice exactly one row.
INSERT INTO mailbox (thread_id, direction, kind, send_key, body, recipient_path, created_at)
VALUES (:thread_id, :direction, :kind, :send_key, :body, :recipient, :at)
ON CONFLICT (thread_id, send_key) DO NOTHING
