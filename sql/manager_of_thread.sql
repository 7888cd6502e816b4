-- The manager session and contract a thread belongs to.
SELECT {thread_manager_row} FROM managers m JOIN threads t ON t.manager_id = m.id WHERE t.id = ?1
