-- A thread's place in its tree: root session and key (thread_places primary key).
SELECT {usage_place_row} FROM thread_places WHERE thread_id = ?1
