-- The own usage of the threads in the JSON array ?1, by position in that array (a list's
-- batch): one thread_usage primary-key lookup per id.
SELECT j.key, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens,
       u.cost_usd, u.turns, u.tool_calls
FROM json_each(?1) AS j JOIN thread_usage AS u ON u.thread_id = j.value
