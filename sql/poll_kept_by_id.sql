-- A poll by thread id: reference resolution step 1 (sql/thread_by_id.sql) and the thread's
-- kept view (?3) at a detail level (?4) as this build (?5) rendered it (sql/snapshot_cached.sql),
-- in one statement, so a poll of a closed thread is one round trip to a PostgreSQL server.
-- Two primary-key lookups.
SELECT {thread_row}, {kept_row}
FROM threads t
LEFT JOIN thread_snapshots s
    ON s.thread_id = t.id AND s.view = ?3 AND s.detail = ?4 AND s.shape = ?5
WHERE t.id = ?1 AND t.manager_id = ?2
