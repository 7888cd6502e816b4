-- sql/usage_told_put.sql on PostgreSQL: two-argument max is greatest, and the columns of the
-- conflicting row are named by their table.
INSERT INTO usage_told (session_id, input_tokens, output_tokens, cache_read_tokens,
                        cache_write_tokens, cost_usd, updated_at)
VALUES (:session_id, :input, :output, :cache_read, :cache_write, :cost, :at)
ON CONFLICT (session_id) DO UPDATE SET
    input_tokens = greatest(usage_told.input_tokens, excluded.input_tokens),
    output_tokens = greatest(usage_told.output_tokens, excluded.output_tokens),
    cache_read_tokens = greatest(usage_told.cache_read_tokens, excluded.cache_read_tokens),
    cache_write_tokens = greatest(usage_told.cache_write_tokens, excluded.cache_write_tokens),
    cost_usd = greatest(usage_told.cost_usd, excluded.cost_usd),
    updated_at = excluded.updated_at
