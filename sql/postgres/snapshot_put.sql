-- sql/snapshot_put.sql on PostgreSQL: INSERT OR REPLACE is an upsert on the primary key.
INSERT INTO thread_snapshots (thread_id, view, detail, shape, json, line)
SELECT id, ?2, ?3, ?4, ?5, ?6 FROM threads WHERE id = ?1 AND (status = 'closed' OR phase = 'idle')
ON CONFLICT (thread_id, view, detail) DO UPDATE SET
    shape = excluded.shape, json = excluded.json, line = excluded.line
