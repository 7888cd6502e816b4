-- One thread's own usage (thread_usage primary key).
SELECT input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, turns,
       tool_calls
FROM thread_usage WHERE thread_id = ?1
