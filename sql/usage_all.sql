-- Every thread's own usage, for listings that show it beside each thread (one scan of
-- thread_usage instead of one lookup per listed thread).
SELECT thread_id, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd,
       turns, tool_calls
FROM thread_usage
