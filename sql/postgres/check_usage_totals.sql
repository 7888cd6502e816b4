-- sql/check_usage_totals.sql on PostgreSQL: two-argument max is greatest.
WITH sums AS (
    SELECT p.root_session, count(*) AS threads, sum(u.input_tokens) AS input_tokens,
           sum(u.output_tokens) AS output_tokens, sum(u.cache_read_tokens) AS cache_read_tokens,
           sum(u.cache_write_tokens) AS cache_write_tokens, sum(u.cost_usd) AS cost_usd,
           sum(u.turns) AS turns, sum(u.tool_calls) AS tool_calls
    FROM thread_places p JOIN thread_usage u ON u.thread_id = p.thread_id
    GROUP BY p.root_session
),
pairs AS (
    SELECT t.root_session, t.threads AS t_threads, t.input_tokens + t.output_tokens
               + t.cache_read_tokens + t.cache_write_tokens AS t_tokens, t.cost_usd AS t_cost,
           t.turns AS t_turns, t.tool_calls AS t_tools, t.input_tokens AS t_in,
           t.output_tokens AS t_out, t.cache_read_tokens AS t_cr, t.cache_write_tokens AS t_cw,
           coalesce(s.threads, 0) AS s_threads, coalesce(s.input_tokens, 0) AS s_in,
           coalesce(s.output_tokens, 0) AS s_out, coalesce(s.cache_read_tokens, 0) AS s_cr,
           coalesce(s.cache_write_tokens, 0) AS s_cw, coalesce(s.cost_usd, 0) AS s_cost,
           coalesce(s.turns, 0) AS s_turns, coalesce(s.tool_calls, 0) AS s_tools
    FROM tree_usage t LEFT JOIN sums s ON s.root_session = t.root_session
    UNION ALL
    SELECT s.root_session, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           s.threads, s.input_tokens, s.output_tokens, s.cache_read_tokens,
           s.cache_write_tokens, s.cost_usd, s.turns, s.tool_calls
    FROM sums s WHERE NOT EXISTS (SELECT 1 FROM tree_usage t WHERE t.root_session = s.root_session)
)
SELECT {check_usage_totals_row}
FROM pairs
WHERE t_threads IS NULL OR t_threads <> s_threads OR t_in <> s_in OR t_out <> s_out
   OR t_cr <> s_cr OR t_cw <> s_cw OR t_turns <> s_turns OR t_tools <> s_tools
   OR abs(t_cost - s_cost) > 1e-9 * greatest(1.0, abs(s_cost))
