-- The manager session and contract a thread belongs to.
SELECT m.session_id, m.contract FROM managers m JOIN threads t ON t.manager_id = m.id WHERE t.id = ?1
