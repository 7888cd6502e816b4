-- Where an adopted thread goes: the adopting manager's scope path and depth, its self thread
-- (the parent of its top-level threads), and the place its top-level threads take in the
-- forest (as the threads_placed trigger finds it: the self thread's place, else the place of
-- the thread whose id is the manager's session; else the top of the manager's own tree).
SELECT {adopt_target_row}
FROM managers m
LEFT JOIN thread_places up ON up.thread_id = coalesce(
    (SELECT p.thread_id FROM thread_places p WHERE p.thread_id = m.self_thread_id),
    (SELECT p.thread_id FROM thread_places p WHERE p.thread_id = m.session_id))
WHERE m.id = ?1
