-- What an adopted thread and the threads below it spent, to move from the old tree's total to
-- the new one's: one range of thread_places_by_key, each usage row by primary key.
SELECT {adopt_spend_row}
FROM thread_places d
JOIN thread_usage u ON u.thread_id = d.thread_id
WHERE d.root_session = :root
  AND d.tree_key >= :key AND d.tree_key < :key || '0'
  AND (length(d.tree_key) = length(:key) OR substr(d.tree_key, length(:key) + 1, 1) = '/')
