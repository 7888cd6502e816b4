-- The rendered views (?2, at ?3, by build ?4) of the threads in the JSON array ?1 (a list's
-- batch) that have one, with their list lines: a primary-key lookup per id. j.key is the id's
-- position.
SELECT j.key, c.json, c.line
FROM json_each(?1) AS j
JOIN thread_snapshots AS c
  ON c.thread_id = j.value AND c.view = ?2 AND c.detail = ?3 AND c.shape = ?4
