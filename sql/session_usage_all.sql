-- Every root session's own turns (session_usage, in primary-key order), for `threadbase usage`.
SELECT session_id, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
       cost_usd, turns, tool_calls
FROM session_usage ORDER BY session_id
