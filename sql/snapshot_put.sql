-- Keeps a view (and a list line) rendered inside this write transaction, only while its thread
-- is still: closed, or live and idle (a busy thread changes with every event). The V8 triggers
-- drop the row on the thread's next change.
INSERT OR REPLACE INTO thread_snapshots (thread_id, view, detail, shape, json, line)
SELECT id, ?2, ?3, ?4, ?5, ?6 FROM threads WHERE id = ?1 AND (status = 'closed' OR phase = 'idle')
