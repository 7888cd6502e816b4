-- Keeps a view rendered inside this write transaction, only while its thread is closed (a
-- live thread changes all the time; the V6 triggers drop the row on its next change).
INSERT OR REPLACE INTO thread_snapshots (thread_id, view, detail, shape, json)
SELECT id, ?2, ?3, ?4, ?5 FROM threads WHERE id = ?1 AND status = 'closed'
