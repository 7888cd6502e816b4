-- threadbase schema, version 9: the event type `thread_adopted` (issue 28: a closed thread of
-- a Pi session that has ended moves under another session, by `threadbase adopt` or by that
-- session's `resume`; the event's data keeps the session it came from and its old path).
--
-- SQLite cannot change a CHECK, so thread_events is rebuilt with its rows (the same columns,
-- key and order; WITHOUT ROWID as before). Nothing else refers to it by name.
CREATE TABLE thread_events_v9 (
    thread_id TEXT    NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL CHECK (seq > 0),
    at        TEXT    NOT NULL,
    type      TEXT    NOT NULL CHECK (type IN (
                  'thread_started', 'thread_resumed', 'thread_forked', 'thread_archived',
                  'thread_stopping', 'thread_closed', 'thread_error',
                  'turn_started', 'turn_completed', 'tool_started', 'tool_completed',
                  'assistant_message', 'ui_request', 'thread_adopted')),
    data      TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(data)),
    PRIMARY KEY (thread_id, seq)
) WITHOUT ROWID;

INSERT INTO thread_events_v9 (thread_id, seq, at, type, data)
SELECT thread_id, seq, at, type, data FROM thread_events;

DROP TABLE thread_events;
ALTER TABLE thread_events_v9 RENAME TO thread_events;
