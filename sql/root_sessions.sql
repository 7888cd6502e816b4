-- Every root session (one tree each: tree_usage, a row per root) with its thread count and
-- where and when it started: its own manager rows, contract A's first, then the oldest (the
-- managers' UNIQUE (session_id, contract) index). For `--session` and the newest-first order
-- of tree, list, usage and top; reads a row or two per session and no thread.
SELECT {root_session_row}
FROM tree_usage u
LEFT JOIN managers m ON m.id = (
    SELECT x.id FROM managers x
    WHERE x.session_id = u.root_session
    ORDER BY x.contract <> 'thread', x.created_at
    LIMIT 1)
WHERE u.threads > 0
