-- sql/session_usage_put.sql on PostgreSQL: two-argument max is greatest, and the columns of
-- the conflicting row are named by their table.
INSERT INTO session_usage (session_id, input_tokens, output_tokens, cache_read_tokens,
                           cache_write_tokens, cost_usd, turns, tool_calls, updated_at)
SELECT :session_id, :input, :output, :cache_read, :cache_write, :cost, :turns, :tool_calls, :at
WHERE NOT EXISTS (SELECT 1 FROM thread_places WHERE thread_id = :self_id)
  AND NOT EXISTS (SELECT 1 FROM thread_places WHERE thread_id = :session_id)
ON CONFLICT (session_id) DO UPDATE SET
    input_tokens = greatest(session_usage.input_tokens, excluded.input_tokens),
    output_tokens = greatest(session_usage.output_tokens, excluded.output_tokens),
    cache_read_tokens = greatest(session_usage.cache_read_tokens, excluded.cache_read_tokens),
    cache_write_tokens = greatest(session_usage.cache_write_tokens, excluded.cache_write_tokens),
    cost_usd = greatest(session_usage.cost_usd, excluded.cost_usd),
    turns = greatest(session_usage.turns, excluded.turns),
    tool_calls = greatest(session_usage.tool_calls, excluded.tool_calls),
    updated_at = excluded.updated_at
RETURNING session_id
