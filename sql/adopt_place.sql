-- An adopted thread's place in the forest before it moves (primary key), and how many threads
-- hang below it (the range of its key in thread_places_by_key).
SELECT p.root_session, p.tree_key, p.level,
       (SELECT count(*) FROM thread_places d
        WHERE d.root_session = p.root_session
          AND d.tree_key > p.tree_key || '/' AND d.tree_key < p.tree_key || '0') AS below
FROM thread_places p
WHERE p.thread_id = ?1
