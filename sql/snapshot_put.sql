-- Keeps a view (and a list line) rendered inside this write transaction, only while its thread
-- is closed (a live thread changes all the time; the V8 triggers drop the row on its next
-- change).
INSERT OR REPLACE INTO thread_snapshots (thread_id, view, detail, shape, json, line)
SELECT id, ?2, ?3, ?4, ?5, ?6 FROM threads WHERE id = ?1 AND status = 'closed'
