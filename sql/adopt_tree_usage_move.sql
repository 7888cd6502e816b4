-- Moves an adopted subtree's counts between two trees' totals: :sign -1 takes them from the
-- old root session's row, +1 adds them to the new one's (created if it has none yet).
INSERT INTO tree_usage (root_session, threads, input_tokens, output_tokens, cache_read_tokens,
                        cache_write_tokens, cost_usd, turns, tool_calls, updated_at)
VALUES (:root, :sign * :threads, :sign * :input, :sign * :output, :sign * :cache_read,
        :sign * :cache_write, :sign * :cost, :sign * :turns, :sign * :tool_calls, :at)
ON CONFLICT (root_session) DO UPDATE SET
    threads = threads + excluded.threads,
    input_tokens = input_tokens + excluded.input_tokens,
    output_tokens = output_tokens + excluded.output_tokens,
    cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
    cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
    cost_usd = cost_usd + excluded.cost_usd,
    turns = turns + excluded.turns,
    tool_calls = tool_calls + excluded.tool_calls,
    updated_at = max(updated_at, excluded.updated_at)
