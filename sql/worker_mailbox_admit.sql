-- Admits one keyed mailbox message; a second message under the same (thread, send_key) is
-- ignored here and compared by the caller (mailbox_by_key.sql) in the same transaction.
INSERT INTO mailbox (thread_id, direction, kind, send_key, message_id, body, created_at)
VALUES (:thread_id, :direction, :kind, :send_key, :message_id, :body, :now)
ON CONFLICT (thread_id, send_key) DO NOTHING
