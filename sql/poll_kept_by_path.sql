-- A poll by path: reference resolution step 2 (sql/thread_by_path.sql) and the thread's
-- kept view (?3) at a detail level (?4) as this build (?5) rendered it (sql/snapshot_cached.sql),
-- in one statement, so a poll of a closed thread is one round trip to a PostgreSQL server.
-- The UNIQUE (manager_id, path) index, then a primary-key lookup.
SELECT {thread_row}, {kept_row}
FROM threads t
LEFT JOIN thread_snapshots s
    ON s.thread_id = t.id AND s.view = ?3 AND s.detail = ?4 AND s.shape = ?5
WHERE t.manager_id = ?1 AND t.path = ?2
