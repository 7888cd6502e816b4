-- threadbase schema, version 7: what a contract A child's last `get_state` answer said about
-- its session, for `snapshot.session` (`{kind: "known", file, id, name, pendingMessageCount}`):
-- its session name and its pending message count. Both stay NULL until the first answer.
-- They live in thread_output beside the other facts the child's stream keeps changing, so a
-- refresh does not rewrite the wide threads row. No index: they are read with the row by its
-- primary key (sql/output_of_thread.sql, sql/outputs_of_threads.sql).

ALTER TABLE thread_output ADD COLUMN session_name TEXT;
ALTER TABLE thread_output ADD COLUMN pending_message_count INTEGER
    CHECK (pending_message_count IS NULL OR pending_message_count >= 0);
