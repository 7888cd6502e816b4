-- The whole-tree spend a budget is checked against: the root session of the thread acted on,
-- else of this serve's own thread, else of the thread whose id is this serve's session (a
-- contract C worker), else the session itself; each a thread_places primary-key lookup, then
-- one tree_usage primary-key lookup.
SELECT root_session, threads, input_tokens, output_tokens, cache_read_tokens,
       cache_write_tokens, cost_usd, turns, tool_calls
FROM tree_usage
WHERE root_session = coalesce(
    (SELECT root_session FROM thread_places WHERE thread_id = :thread_id),
    (SELECT root_session FROM thread_places WHERE thread_id = :self_id),
    (SELECT root_session FROM thread_places WHERE thread_id = :session_id),
    :session_id)
