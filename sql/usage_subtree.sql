-- What a thread and all of its descendants spent, across every manager of its tree: the
-- subtree_usage view for one thread, one range of thread_places_by_key.
SELECT threads, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd,
       turns, tool_calls
FROM subtree_usage WHERE thread_id = ?1
