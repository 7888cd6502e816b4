-- The status line of one root session's tree (issue 45 item 4): how many of its threads are in
-- each condition, and what the tree spent. The root is found as sql/usage_tree_of.sql finds it
-- (this serve's own thread, else the thread whose id is this session, else the session; each a
-- thread_places primary-key lookup). The tree is one range of thread_places_by_key
-- (root_session = the root: every manager of the tree, children's own serves included), each
-- thread read by primary key; the view thread_attention is asked (by thread id, its primary-key
-- lookups) only for the live threads and the closed ones it can call failed (not archived,
-- exited or failed), once each (the materialized CTE). A live thread's condition is its
-- attention word, else its phase; a closed thread counts only as failed. A row per condition,
-- with the tree's spend on each: tree_usage plus the root session's own turns (session_usage),
-- what `threadbase usage` says for the tree; one row of NULL condition when nothing counts.
WITH root (session_id) AS (
    SELECT coalesce(
        (SELECT root_session FROM thread_places WHERE thread_id = :self_id),
        (SELECT root_session FROM thread_places WHERE thread_id = :session_id),
        :session_id)
),
conditions (attention, phase) AS MATERIALIZED (
    SELECT (SELECT a.attention FROM thread_attention a WHERE a.thread_id = t.id),
           CASE WHEN t.status = 'live' THEN t.phase END
    FROM root r
    JOIN thread_places p ON p.root_session = r.session_id
    JOIN threads t ON t.id = p.thread_id
    WHERE t.status = 'live'
       OR (t.archived = 0 AND t.exit_kind IN ('failed', 'exited'))
),
counted (attention, phase, n) AS (
    SELECT attention, CASE WHEN attention IS NULL THEN phase END, count(*)
    FROM conditions
    WHERE attention IS NOT NULL OR phase IS NOT NULL
    GROUP BY 1, 2
)
SELECT {tree_status_row}
FROM root r
LEFT JOIN counted c ON 1 = 1
LEFT JOIN tree_usage ON tree_usage.root_session = r.session_id
LEFT JOIN session_usage ON session_usage.session_id = r.session_id
