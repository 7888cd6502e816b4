-- The whole database's spend, for a team budget (V15): every tree's threads (tree_usage, one row
-- per root session) and every session's own turns (session_usage, one row per root session).
-- Sums over those small tables, never over threads. (CAST AS BIGINT: PostgreSQL sums bigints
-- as numeric.)
SELECT
    CAST((SELECT coalesce(sum(threads), 0) FROM tree_usage) AS BIGINT) AS threads,
    CAST((SELECT coalesce(sum(input_tokens), 0) FROM tree_usage)
        + (SELECT coalesce(sum(input_tokens), 0) FROM session_usage) AS BIGINT) AS input_tokens,
    CAST((SELECT coalesce(sum(output_tokens), 0) FROM tree_usage)
        + (SELECT coalesce(sum(output_tokens), 0) FROM session_usage) AS BIGINT) AS output_tokens,
    CAST((SELECT coalesce(sum(cache_read_tokens), 0) FROM tree_usage)
        + (SELECT coalesce(sum(cache_read_tokens), 0) FROM session_usage) AS BIGINT) AS cache_read_tokens,
    CAST((SELECT coalesce(sum(cache_write_tokens), 0) FROM tree_usage)
        + (SELECT coalesce(sum(cache_write_tokens), 0) FROM session_usage) AS BIGINT) AS cache_write_tokens,
    (SELECT coalesce(sum(cost_usd), 0.0) FROM tree_usage)
        + (SELECT coalesce(sum(cost_usd), 0.0) FROM session_usage) AS cost_usd,
    (SELECT count(*) FROM tree_usage) AS trees,
    CAST((SELECT coalesce(sum(turns), 0) FROM tree_usage)
        + (SELECT coalesce(sum(turns), 0) FROM session_usage) AS BIGINT) AS turns,
    CAST((SELECT coalesce(sum(tool_calls), 0) FROM tree_usage)
        + (SELECT coalesce(sum(tool_calls), 0) FROM session_usage) AS BIGINT) AS tool_calls
