-- Contract B threads whose process this serve holds (threads_live: manager and owner).
SELECT id, agent_state FROM threads
WHERE manager_id = ?1 AND status = 'live' AND owner_pid = ?2 AND owner_started_at = ?3
