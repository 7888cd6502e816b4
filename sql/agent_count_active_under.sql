-- Working descendants of a thread (?2/?3 = the descendant range of its sort key).
SELECT count(*) FROM threads
WHERE manager_id = ?1 AND sort_key > ?2 AND sort_key < ?3 AND agent_state IN ('starting', 'running')
