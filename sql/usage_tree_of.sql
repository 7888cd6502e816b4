-- The whole-tree spend a budget is checked against: the root session of the thread acted on,
-- else of this serve's own thread, else of the thread whose id is this serve's session (a
-- contract C worker), else the session itself; each a thread_places primary-key lookup. Then
-- the tree's threads (tree_usage primary key) plus the root session's own turns
-- (session_usage primary key): columns 3-9 the sum, 10-16 the root session's own part. A
-- tree with no threads yet has spent what its root session spent.
WITH root (session_id) AS (
    SELECT coalesce(
        (SELECT root_session FROM thread_places WHERE thread_id = :thread_id),
        (SELECT root_session FROM thread_places WHERE thread_id = :self_id),
        (SELECT root_session FROM thread_places WHERE thread_id = :session_id),
        :session_id)
)
SELECT {usage_tree_of_row}
FROM root r
LEFT JOIN tree_usage ON tree_usage.root_session = r.session_id
LEFT JOIN session_usage ON session_usage.session_id = r.session_id
