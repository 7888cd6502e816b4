-- What agent_stop stops: the thread itself, in any state, and its descendants that are working
-- (completed ones stay completed), deepest first. ?2 = the path, ?3/?4 = its descendant range.
SELECT {agent_stop_target_row} FROM threads
WHERE manager_id = ?1
  AND (path = ?2 OR (sort_key > ?3 AND sort_key < ?4 AND agent_state IN ('starting', 'running')))
ORDER BY length(path) DESC, sort_key
