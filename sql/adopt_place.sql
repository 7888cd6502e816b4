-- An adopted thread's place in the forest before it moves (primary key), and how many threads
-- hang below it (the range of its key in thread_places_by_key).
SELECT {adopt_place_row}
FROM thread_places p
WHERE p.thread_id = ?1
