-- A root session's own turns (session_usage primary key): what its Pi extension reported.
SELECT input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, turns,
       tool_calls
FROM session_usage WHERE session_id = ?1
