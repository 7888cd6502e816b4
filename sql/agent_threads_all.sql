-- Every thread of a registry in spawn order (rowid order; threads_agent_by_manager holds the
-- rowids of one registry's contract B threads in order, so there is no sort step).
-- Reaped threads are forgotten by the contract.
SELECT {agent_row}
FROM threads
WHERE manager_id = ?1 AND agent_state IS NOT NULL AND agent_reaped_at IS NULL
ORDER BY rowid
