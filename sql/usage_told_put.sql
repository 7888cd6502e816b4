-- Moves what a Pi session was told up to the spend below it (usage_told primary key), in the
-- transaction that read the difference; never down.
INSERT INTO usage_told (session_id, input_tokens, output_tokens, cache_read_tokens,
                        cache_write_tokens, cost_usd, updated_at)
VALUES (:session_id, :input, :output, :cache_read, :cache_write, :cost, :at)
ON CONFLICT (session_id) DO UPDATE SET
    input_tokens = max(input_tokens, excluded.input_tokens),
    output_tokens = max(output_tokens, excluded.output_tokens),
    cache_read_tokens = max(cache_read_tokens, excluded.cache_read_tokens),
    cache_write_tokens = max(cache_write_tokens, excluded.cache_write_tokens),
    cost_usd = max(cost_usd, excluded.cost_usd),
    updated_at = excluded.updated_at
