-- The threads of one root session's tree at or below the key range [?2, ?3) (the whole tree:
-- '/' and '0'), in tree order, each with its own usage and its subtree's: the subtree_usage
-- view pushed down to that range of thread_places_by_key, and primary-key lookups.
SELECT s.thread_id, t.path, m.session_id, m.contract, p.level, p.forest_parent_id, t.status,
       t.phase, t.agent_state, t.name,
       u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, u.cost_usd,
       u.turns, u.tool_calls,
       s.threads, s.input_tokens, s.output_tokens, s.cache_read_tokens, s.cache_write_tokens,
       s.cost_usd, s.turns, s.tool_calls, s.tree_key, t.exit_kind, t.exit_code, t.exit_signal,
       t.owner_pid, t.owner_started_at
FROM subtree_usage s
JOIN thread_places p ON p.thread_id = s.thread_id
JOIN threads t ON t.id = s.thread_id
JOIN managers m ON m.id = t.manager_id
JOIN thread_usage u ON u.thread_id = s.thread_id
WHERE s.root_session = ?1 AND s.tree_key >= ?2 AND s.tree_key < ?3
ORDER BY s.tree_key
