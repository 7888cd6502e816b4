-- `--session ID` where ID is a manager's session id (a child Pi's own serve) or a prefix of
-- one, bounds [:lo, :hi): each such manager's session id and the root session of the tree it
-- sits in (its own thread's place, else one of its threads' places, else the place of the
-- thread whose id is its session: a contract C worker's serve). A range of the managers'
-- UNIQUE (session_id, contract) index, then primary-key and threads_by_sort_key lookups.
SELECT m.session_id, coalesce(
    (SELECT p.root_session FROM thread_places p WHERE p.thread_id = m.self_thread_id),
    (SELECT p.root_session FROM threads t JOIN thread_places p ON p.thread_id = t.id
     WHERE t.manager_id = m.id LIMIT 1),
    (SELECT p.root_session FROM thread_places p WHERE p.thread_id = m.session_id))
FROM managers m
WHERE m.session_id >= :lo AND m.session_id < :hi
LIMIT :limit
