-- Every root session's whole-tree total (tree_usage, in primary-key order).
SELECT root_session, threads, input_tokens, output_tokens, cache_read_tokens,
       cache_write_tokens, cost_usd, turns, tool_calls
FROM tree_usage ORDER BY root_session
