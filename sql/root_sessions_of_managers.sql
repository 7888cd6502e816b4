-- `--session ID` where ID is a manager's session id (a child Pi's own serve) or a prefix of
-- one, bounds [:lo, :hi): each such manager's session id and the root session of the tree it
-- sits in (its own thread's place, else one of its threads' places, else the place of the
-- thread whose id is its session: a contract C worker's serve). A range of the managers'
-- UNIQUE (session_id, contract) index, then primary-key and threads_by_sort_key lookups.
SELECT {manager_root_row}
FROM managers m
WHERE m.session_id >= :lo AND m.session_id < :hi
LIMIT :limit
