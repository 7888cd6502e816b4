-- sql/agent_owned_pending_steers.sql on PostgreSQL: a plain JOIN for SQLite's CROSS JOIN … ON
-- (which only fixes SQLite's join order); no INDEXED BY (an index hint SQLite needs;
-- PostgreSQL's planner chooses the index).
SELECT DISTINCT t.id FROM mailbox mb
JOIN threads t ON t.id = mb.thread_id
WHERE mb.state = 'pending' AND mb.direction = 'to_child' AND t.manager_id = ?1
  AND t.owner_pid = ?2 AND t.owner_started_at = ?3
  -- On this host and boot: a serve elsewhere may have the same pid and start.
  AND (t.host_id IS NULL OR t.host_id = ?4) AND (t.boot_id IS NULL OR t.boot_id = ?5)
  AND (mb.message_id IS NULL OR mb.message_id <> CAST(t.launch_seq AS TEXT) OR t.status = 'closed')
