-- The spend below a root Pi session: every thread of its tree (tree_usage primary key).
SELECT input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd
FROM tree_usage WHERE root_session = ?1
