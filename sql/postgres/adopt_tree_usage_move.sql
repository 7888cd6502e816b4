-- sql/adopt_tree_usage_move.sql on PostgreSQL: the products of two parameters need their
-- types, the columns of the conflicting row are named by their table, and two-argument max is
-- greatest.
INSERT INTO tree_usage (root_session, threads, input_tokens, output_tokens, cache_read_tokens,
                        cache_write_tokens, cost_usd, turns, tool_calls, updated_at)
VALUES (:root, CAST(:sign AS bigint) * CAST(:threads AS bigint),
        CAST(:sign AS bigint) * CAST(:input AS bigint),
        CAST(:sign AS bigint) * CAST(:output AS bigint),
        CAST(:sign AS bigint) * CAST(:cache_read AS bigint),
        CAST(:sign AS bigint) * CAST(:cache_write AS bigint),
        CAST(:sign AS bigint) * CAST(:cost AS double precision),
        CAST(:sign AS bigint) * CAST(:turns AS bigint),
        CAST(:sign AS bigint) * CAST(:tool_calls AS bigint), :at)
ON CONFLICT (root_session) DO UPDATE SET
    threads = tree_usage.threads + excluded.threads,
    input_tokens = tree_usage.input_tokens + excluded.input_tokens,
    output_tokens = tree_usage.output_tokens + excluded.output_tokens,
    cache_read_tokens = tree_usage.cache_read_tokens + excluded.cache_read_tokens,
    cache_write_tokens = tree_usage.cache_write_tokens + excluded.cache_write_tokens,
    cost_usd = tree_usage.cost_usd + excluded.cost_usd,
    turns = tree_usage.turns + excluded.turns,
    tool_calls = tree_usage.tool_calls + excluded.tool_calls,
    updated_at = greatest(tree_usage.updated_at, excluded.updated_at)
