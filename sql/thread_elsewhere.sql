-- An unknown reference's hint (contract A): the Pi session whose tree holds the thread with id
-- ?1, when the caller cannot reach it: the root session of that thread's tree and the session
-- file `pi --session` continues, else the thread's own manager's. Primary-key lookups
-- (threads, thread_places, managers by (session_id, contract)).
SELECT coalesce(p.root_session, m.session_id),
       coalesce((SELECT r.session_file FROM managers r
                 WHERE r.session_id = p.root_session AND r.session_file IS NOT NULL
                 ORDER BY r.depth LIMIT 1), m.session_file),
       t.path
FROM threads t
JOIN managers m ON m.id = t.manager_id
LEFT JOIN thread_places p ON p.thread_id = t.id
WHERE t.id = ?1 AND t.manager_id <> ?2
