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
SELECT r.session_id, coalesce(t.threads, 0),
       coalesce(t.input_tokens, 0) + coalesce(s.input_tokens, 0),
       coalesce(t.output_tokens, 0) + coalesce(s.output_tokens, 0),
       coalesce(t.cache_read_tokens, 0) + coalesce(s.cache_read_tokens, 0),
       coalesce(t.cache_write_tokens, 0) + coalesce(s.cache_write_tokens, 0),
       coalesce(t.cost_usd, 0) + coalesce(s.cost_usd, 0),
       coalesce(t.turns, 0) + coalesce(s.turns, 0),
       coalesce(t.tool_calls, 0) + coalesce(s.tool_calls, 0),
       s.input_tokens, s.output_tokens, s.cache_read_tokens, s.cache_write_tokens, s.cost_usd,
       s.turns, s.tool_calls
FROM root r
LEFT JOIN tree_usage t ON t.root_session = r.session_id
LEFT JOIN session_usage s ON s.session_id = r.session_id
