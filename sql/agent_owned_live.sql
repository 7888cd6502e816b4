-- Contract B threads whose process this serve holds (threads_live: manager and owner).
SELECT {agent_owned_row} FROM threads
WHERE manager_id = ?1 AND status = 'live' AND owner_pid = ?2 AND owner_started_at = ?3
  -- On this host and boot: a serve elsewhere may have the same pid and start.
  AND (owner_host IS NULL OR owner_host = ?4) AND (owner_boot IS NULL OR owner_boot = ?5)
