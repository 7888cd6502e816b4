-- Control requests for this serve: stops, interrupts and sends for threads whose process it
-- holds, resumes and merges (issue 48) of closed threads of its own manager (?3). Read from the partial index
-- commands_pending (only pending rows; done commands stay in the table), each row's thread
-- then found by primary key.
SELECT {pending_command_row}
FROM commands c INDEXED BY commands_pending CROSS JOIN threads t ON t.id = c.thread_id
WHERE c.state = 'pending'
  AND ((t.owner_pid = ?1 AND t.owner_started_at = ?2 AND t.status = 'live'
        -- On this host and boot (?4, ?5): a serve elsewhere may have the same pid and start.
        AND (t.host_id IS NULL OR t.host_id = ?4) AND (t.boot_id IS NULL OR t.boot_id = ?5))
       OR (c.kind IN ('resume', 'merge') AND t.manager_id = ?3 AND t.status = 'closed')
       -- A stop of a queued thread of its own manager that has no process yet (issue 30).
       OR (c.kind IN ('stop', 'force_stop') AND t.manager_id = ?3 AND t.status = 'live'
           AND t.queued_at IS NOT NULL AND t.launch_seq = 0))
ORDER BY c.id
