-- Sets a root session's own usage (session_usage primary key) to the cumulative total its Pi
-- extension reported, never lower than what the row has (a late or repeated report changes
-- nothing). Only for a session that is no thread's (neither :self_id nor :session_id has a
-- place: a managed child's own turns are its thread's usage already); returns the row's
-- session id when it was written.
INSERT INTO session_usage (session_id, input_tokens, output_tokens, cache_read_tokens,
                           cache_write_tokens, cost_usd, turns, tool_calls, updated_at)
SELECT :session_id, :input, :output, :cache_read, :cache_write, :cost, :turns, :tool_calls, :at
WHERE NOT EXISTS (SELECT 1 FROM thread_places WHERE thread_id = :self_id)
  AND NOT EXISTS (SELECT 1 FROM thread_places WHERE thread_id = :session_id)
ON CONFLICT (session_id) DO UPDATE SET
    input_tokens = max(input_tokens, excluded.input_tokens),
    output_tokens = max(output_tokens, excluded.output_tokens),
    cache_read_tokens = max(cache_read_tokens, excluded.cache_read_tokens),
    cache_write_tokens = max(cache_write_tokens, excluded.cache_write_tokens),
    cost_usd = max(cost_usd, excluded.cost_usd),
    turns = max(turns, excluded.turns),
    tool_calls = max(tool_calls, excluded.tool_calls),
    updated_at = excluded.updated_at
RETURNING session_id
