-- sql/usage_of_threads.sql on PostgreSQL: the JSON array ?1 is read with
-- jsonb_array_elements_text WITH ORDINALITY (json_each's key is the 0-based position).
SELECT (j.ord - 1), u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens,
       u.cost_usd, u.turns, u.tool_calls
FROM jsonb_array_elements_text(CAST(?1 AS jsonb)) WITH ORDINALITY AS j (value, ord) JOIN thread_usage AS u ON u.thread_id = j.value
