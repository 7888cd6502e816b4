-- What a Pi session's tool results have reported of the spend below it (usage_told primary
-- key).
SELECT input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd
FROM usage_told WHERE session_id = ?1
