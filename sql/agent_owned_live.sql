-- Contract B threads whose process this serve holds (threads_live: manager and owner).
SELECT {agent_owned_row} FROM threads
WHERE manager_id = ?1 AND status = 'live' AND owner_pid = ?2 AND owner_started_at = ?3
  -- On this host and boot: a serve elsewhere may have the same pid and start.
  AND (host_id IS NULL OR host_id = ?4) AND (boot_id IS NULL OR boot_id = ?5)
