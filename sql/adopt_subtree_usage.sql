-- What an adopted thread and the threads below it spent, to move from the old tree's total to
-- the new one's: one range of thread_places_by_key, each usage row by primary key.
SELECT count(*) AS threads, coalesce(sum(u.input_tokens), 0) AS input_tokens,
       coalesce(sum(u.output_tokens), 0) AS output_tokens,
       coalesce(sum(u.cache_read_tokens), 0) AS cache_read_tokens,
       coalesce(sum(u.cache_write_tokens), 0) AS cache_write_tokens,
       coalesce(sum(u.cost_usd), 0) AS cost_usd, coalesce(sum(u.turns), 0) AS turns,
       coalesce(sum(u.tool_calls), 0) AS tool_calls
FROM thread_places d
JOIN thread_usage u ON u.thread_id = d.thread_id
WHERE d.root_session = :root
  AND d.tree_key >= :key AND d.tree_key < :key || '0'
  AND (length(d.tree_key) = length(:key) OR substr(d.tree_key, length(:key) + 1, 1) = '/')
