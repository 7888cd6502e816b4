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
SELECT r.session_id, coalesce(tree_usage.threads, 0),
       coalesce(tree_usage.input_tokens, 0) + coalesce(session_usage.input_tokens, 0),
       coalesce(tree_usage.output_tokens, 0) + coalesce(session_usage.output_tokens, 0),
       coalesce(tree_usage.cache_read_tokens, 0) + coalesce(session_usage.cache_read_tokens, 0),
       coalesce(tree_usage.cache_write_tokens, 0) + coalesce(session_usage.cache_write_tokens, 0),
       coalesce(tree_usage.cost_usd, 0) + coalesce(session_usage.cost_usd, 0),
       coalesce(tree_usage.turns, 0) + coalesce(session_usage.turns, 0),
       coalesce(tree_usage.tool_calls, 0) + coalesce(session_usage.tool_calls, 0),
       session_usage.input_tokens, session_usage.output_tokens,
       session_usage.cache_read_tokens, session_usage.cache_write_tokens,
       session_usage.cost_usd, session_usage.turns, session_usage.tool_calls
FROM root r
LEFT JOIN tree_usage ON tree_usage.root_session = r.session_id
LEFT JOIN session_usage ON session_usage.session_id = r.session_id
