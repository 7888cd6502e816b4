-- Contract B threads whose process this serve holds (threads_live: manager and owner).
SELECT {agent_owned_row} FROM threads
WHERE manager_id = ?1 AND status = 'live' AND owner_pid = ?2 AND owner_started_at = ?3
