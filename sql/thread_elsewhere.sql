-- An unknown reference's hint (contract A): the Pi session whose tree holds the thread with id
-- ?1, when the caller cannot reach it: the root session of that thread's tree and the session
-- file `pi --session` continues, else the thread's own manager's. Primary-key lookups
-- (threads, thread_places, managers by (session_id, contract)).
SELECT {thread_elsewhere_row}
FROM threads t
JOIN managers m ON m.id = t.manager_id
LEFT JOIN thread_places p ON p.thread_id = t.id
WHERE t.id = ?1 AND t.manager_id <> ?2
